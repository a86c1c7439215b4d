//go:build cluster

package operator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// The Events tests below run the operator against the package's control
// plane and read the Events it records there.

// pluginEventsOf lists the operator's Events regarding p (by UID), oldest
// first.
func (f *fixture) pluginEventsOf(p *v1alpha1.Plugin) []eventsv1.Event {
	f.t.Helper()
	var list eventsv1.EventList
	if err := f.cl.List(context.Background(), &list, client.InNamespace(plugins.Namespace)); err != nil {
		f.t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.UID == p.UID && e.ReportingController == EventReportingController {
			out = append(out, e)
		}
	}
	// Event names end in the recording time in hexadecimal nanoseconds.
	slices.SortFunc(out, func(a, b eventsv1.Event) int {
		if c := a.EventTime.Compare(b.EventTime.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// eventReasons renders events as "Type Reason".
func eventReasons(es []eventsv1.Event) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.Type+" "+e.Reason)
	}
	return out
}

// waitEvents waits until the operator's Events on p are exactly want
// ("Type Reason", oldest first) and returns them.
func (f *fixture) waitEvents(p *v1alpha1.Plugin, want ...string) []eventsv1.Event {
	f.t.Helper()
	var got []eventsv1.Event
	testutil.Eventually(f.t, waitTimeout, p.Name+" events "+strings.Join(want, ", "), func() (bool, string) {
		got = f.pluginEventsOf(p)
		return slices.Equal(eventReasons(got), want), strings.Join(eventReasons(got), ", ")
	})
	return got
}

// waitGrantValid waits until the grant controller saw the grant, so the
// operator's cache holds it before the Plugin is created.
func (f *fixture) waitGrantValid(name string) {
	f.t.Helper()
	testutil.Eventually(f.t, waitTimeout, name+" grant Valid", func() (bool, string) {
		var g v1alpha1.PluginGrant
		if err := f.cl.Get(context.Background(), types.NamespacedName{Namespace: plugins.Namespace, Name: name}, &g); err != nil {
			return false, err.Error()
		}
		return len(g.Status.Conditions) > 0 && g.Status.ObservedGeneration == g.Generation, describeJSON(g.Status)
	})
}

func TestEventsTellThePluginsStory(t *testing.T) {
	f := newFixture(t)
	const configMarker = "config-value-never-in-events"
	p := testutil.MakePlugin("story", testutil.Image("story-1")).Egress("api.nbp.pl").
		ConfigSchema(`{"type":"object","properties":{"marker":{"type":"string"}}}`).
		Config(`{"marker":"` + configMarker + `"}`).Obj()
	grant := testutil.MakeGrant(p.Name).Capabilities("connector").Obj()
	f.create(grant)
	f.waitGrantValid(p.Name)

	// Install: verified, but the grant does not approve the host yet.
	f.images.sign(p.Spec.Image)
	f.create(p)
	f.waitReady(p.Name, v1alpha1.ReasonAwaitingApproval)
	f.waitEvents(p, "Normal ImageVerified", "Normal NotRunning")

	// Approve: the first version rolls out.
	update(t, f.cl, grant.DeepCopy(), func(g *v1alpha1.PluginGrant) { g.Spec.Egress = []v1alpha1.EgressHost{"api.nbp.pl"} })
	f.waitEvents(p, "Normal ImageVerified", "Normal NotRunning", "Normal RolledOut")

	// Upgrade asking for one more host: verified, the first version kept.
	v2 := testutil.Image("story-2")
	f.images.sign(v2)
	update(t, f.cl, p.DeepCopy(), func(p *v1alpha1.Plugin) {
		p.Spec.Image = v2
		p.Spec.Manifest.Egress = append(p.Spec.Manifest.Egress, "static.nbp.pl")
	})
	f.waitEvents(p, "Normal ImageVerified", "Normal NotRunning", "Normal RolledOut",
		"Normal ImageVerified", "Normal KeptPreviousVersion")
	// Passes while it waits say nothing new (the next wait wants exactly
	// one more Event).
	label(t, f.cl, p.DeepCopy(), "waiting", "yes")
	label(t, f.cl, grant.DeepCopy(), "waiting", "yes")
	time.Sleep(time.Second)

	// Approve the upgrade: the second version rolls out.
	update(t, f.cl, grant.DeepCopy(), func(g *v1alpha1.PluginGrant) {
		g.Spec.Egress = []v1alpha1.EgressHost{"api.nbp.pl", "static.nbp.pl"}
	})
	f.waitEvents(p, "Normal ImageVerified", "Normal NotRunning", "Normal RolledOut",
		"Normal ImageVerified", "Normal KeptPreviousVersion", "Normal RolledOut")

	// Revoke: the grant goes, the workload is torn down.
	f.delete(testutil.MakeGrant(p.Name).Obj())
	f.waitTornDown(p.Name)
	story := []string{"Normal ImageVerified", "Normal NotRunning", "Normal RolledOut",
		"Normal ImageVerified", "Normal KeptPreviousVersion", "Normal RolledOut", "Normal Revoked"}
	f.waitEvents(p, story...)

	// Passes that change nothing record nothing, and nothing was recorded
	// twice (a repeat within client-go's window would become a series).
	before := f.operator.writes.writes.Load()
	label(t, f.cl, p.DeepCopy(), "touched", "yes")
	time.Sleep(2 * time.Second)
	if n := f.operator.writes.writes.Load() - before; n != 0 {
		t.Errorf("passes after a label sent %d writes, want 0", n)
	}
	got := f.pluginEventsOf(p)
	if diff := cmp.Diff(story, eventReasons(got)); diff != "" {
		t.Fatalf("events after a label (-want +got):\n%s", diff)
	}

	wantNotes := []string{
		"SignedByTrustedSigner: signed by test",
		"AwaitingApproval: waiting for approval of egress: api.nbp.pl:443",
		"rolled out " + p.Spec.Image + " (SignedByTrustedSigner, signer test-owner)",
		"SignedByTrustedSigner: signed by test",
		"keeps running " + p.Spec.Image + ": the current spec waits for approval of egress: static.nbp.pl:443",
		"rolled out " + v2 + " (SignedByTrustedSigner, signer test-owner)",
		v2 + " was torn down: no PluginGrant named story; nothing runs",
	}
	var notes []string
	for _, e := range got {
		notes = append(notes, e.Note)
		if e.Series != nil || e.Action == "" || e.Regarding.Kind != "Plugin" || e.Regarding.Name != p.Name {
			t.Errorf("event %s: series %v, action %q, regarding %+v", e.Reason, e.Series, e.Action, e.Regarding)
		}
		if strings.Contains(e.Note, configMarker) {
			t.Errorf("event %s carries a config value: %q", e.Reason, e.Note)
		}
	}
	if diff := cmp.Diff(wantNotes, notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}

	// kubectl describe lists core/v1 Events by the involved object: the same
	// story.
	var core corev1.EventList
	if err := f.cl.List(context.Background(), &core, client.InNamespace(plugins.Namespace),
		client.MatchingFields{"involvedObject.uid": string(p.UID)}); err != nil {
		t.Fatal(err)
	}
	if len(core.Items) != len(story) {
		t.Errorf("core/v1 lists %d Events for the Plugin, want %d", len(core.Items), len(story))
	}
}

func TestRefusedImageRecordsWarning(t *testing.T) {
	f := newFixture(t) // nothing signed
	p := testutil.MakePlugin("refused-ev", testutil.Image("refused-ev-1")).Obj()
	f.create(testutil.GrantFor(p).Obj())
	f.waitGrantValid(p.Name)
	f.create(p)
	f.waitReady(p.Name, v1alpha1.ReasonSignatureNotVerified)
	got := f.waitEvents(p, "Warning ImageRefused")
	if note := got[0].Note; note != "Unsigned: no signature (test)" {
		t.Errorf("note %q, want the verification reason and message", note)
	}
}

func TestEventNotesFitTheAPILimit(t *testing.T) {
	f := newFixture(t)
	w := testutil.MakePlugin("longnote", testutil.Image("longnote-1"))
	for i := range 40 {
		w.Egress(fmt.Sprintf("h%02d-%s.example.com", i, strings.Repeat("x", 40)))
	}
	p := w.Obj()
	f.create(testutil.MakeGrant(p.Name).Capabilities("connector").Obj())
	f.waitGrantValid(p.Name)
	f.images.sign(p.Spec.Image)
	f.create(p)
	f.waitReady(p.Name, v1alpha1.ReasonAwaitingApproval)
	// The API server refuses a note over 1024 bytes: the Event would be lost.
	got := f.waitEvents(p, "Normal ImageVerified", "Normal NotRunning")
	if n := len(got[1].Note); n > MaxMessageBytes || !strings.HasSuffix(got[1].Note, "...") {
		t.Errorf("NotRunning note of %d bytes, want it cut to %d", n, MaxMessageBytes)
	}
}

func TestClusterUnavailableEventsParkAndResume(t *testing.T) {
	f := newFixture(t)
	defer f.operator.stop() // before the cleanup puts the Service back
	t.Cleanup(func() { testCluster(t) })
	p := testutil.MakePlugin("parked-ev", testutil.Image("parked-ev-1")).Obj()
	f.create(testutil.GrantFor(p).Obj())
	f.waitGrantValid(p.Name)
	f.install(p)
	f.waitEvents(p, "Normal ImageVerified", "Normal RolledOut")

	var core corev1.Service
	if err := f.cl.Get(context.Background(), types.NamespacedName{Namespace: plugins.Namespace, Name: DefaultCoreService}, &core); err != nil {
		t.Fatal(err)
	}
	f.delete(&core)
	f.waitReady(p.Name, v1alpha1.ReasonClusterUnavailable)
	f.waitEvents(p, "Normal ImageVerified", "Normal RolledOut", "Warning Parked")

	testCluster(t) // the Services are back
	f.waitReady(p.Name, v1alpha1.ReasonProgressing)
	f.waitEvents(p, "Normal ImageVerified", "Normal RolledOut", "Warning Parked", "Normal Resumed")
}

// install signs p's image and creates p, whose grant exists, and waits until
// its workload is applied.
func (f *fixture) install(p *v1alpha1.Plugin) {
	f.t.Helper()
	f.images.sign(p.Spec.Image)
	f.create(p)
	f.waitReady(p.Name, v1alpha1.ReasonProgressing)
}
