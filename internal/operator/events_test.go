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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// statusWrapper builds a PluginStatus for the pluginEvents table.
type statusWrapper struct{ v1alpha1.PluginStatus }

// status starts a status that observed generation gen.
func status(gen int64) *statusWrapper {
	return &statusWrapper{v1alpha1.PluginStatus{ObservedGeneration: gen}}
}

func (w *statusWrapper) cond(typ string, st metav1.ConditionStatus, reason, msg string) *statusWrapper {
	w.Conditions = append(w.Conditions, metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg, ObservedGeneration: w.ObservedGeneration})
	return w
}

func (w *statusWrapper) sig(st metav1.ConditionStatus, reason, msg string) *statusWrapper {
	return w.cond(v1alpha1.ConditionSignatureVerified, st, reason, msg)
}

func (w *statusWrapper) signed() *statusWrapper {
	return w.sig(metav1.ConditionTrue, v1alpha1.ReasonSignedByTrustedSigner, "signed by trusted signer ci")
}

func (w *statusWrapper) ready(reason, msg string) *statusWrapper {
	st := metav1.ConditionFalse
	if reason == v1alpha1.ReasonRunning || reason == v1alpha1.ReasonRunningPreviousVersion {
		st = metav1.ConditionTrue
	}
	return w.cond(v1alpha1.ConditionReady, st, reason, msg)
}

func (w *statusWrapper) deployed(d *v1alpha1.DeployedVersion) *statusWrapper {
	w.Deployed = d
	return w
}

func (w *statusWrapper) pending(egress ...string) *statusWrapper {
	w.PendingApproval = &v1alpha1.PendingApproval{Egress: egress}
	return w
}

func (w *statusWrapper) obj() *v1alpha1.PluginStatus { return w.DeepCopy() }

// record is a verified-version record of image word, verified at second s.
func record(word string, s int64) *v1alpha1.DeployedVersion {
	return &v1alpha1.DeployedVersion{
		Image: "registry.example.com/p@" + testutil.Digest(word), Signer: "ci", Trust: v1alpha1.ReasonSignedByTrustedSigner,
		VerifiedAt: &metav1.Time{Time: time.Unix(s, 0)},
	}
}

func TestPluginEvents(t *testing.T) {
	v1, v2 := record("v1", 100), record("v2", 200)
	waiting := &keptPrevious{why: "the current spec waits for approval of egress: static.nbp.pl:443", waitsForApproval: true}
	refused := &keptPrevious{why: "the current spec cannot run: no signature"}
	running := func(gen int64, d *v1alpha1.DeployedVersion) *statusWrapper {
		return status(gen).signed().ready(v1alpha1.ReasonRunning, "running "+d.Image).deployed(d)
	}
	tests := map[string]struct {
		prev, next  *v1alpha1.PluginStatus
		kept        *keptPrevious
		applyFailed bool
		want        []string // "Type Reason: note"
	}{
		"first install verifies and rolls out": {
			prev: status(0).obj(),
			next: status(1).signed().ready(v1alpha1.ReasonProgressing, "waiting").deployed(v1).obj(),
			want: []string{
				"Normal ImageVerified: SignedByTrustedSigner: signed by trusted signer ci",
				"Normal RolledOut: rolled out " + v1.Image + " (SignedByTrustedSigner, signer ci)",
			},
		},
		"steady state": {
			prev: running(1, v1).obj(),
			next: running(1, v1).obj(),
		},
		"the Deployment becomes available": {
			prev: status(1).signed().ready(v1alpha1.ReasonProgressing, "waiting").deployed(v1).obj(),
			next: running(1, v1).obj(),
		},
		"a condition message alone changes": {
			prev: status(1).sig(metav1.ConditionTrue, v1alpha1.ReasonVerified, "signed by a").ready(v1alpha1.ReasonRunning, "x").deployed(v1).obj(),
			next: status(1).sig(metav1.ConditionTrue, v1alpha1.ReasonVerified, "signed by b").ready(v1alpha1.ReasonRunning, "x").deployed(v1).obj(),
		},
		"first install awaits approval": {
			prev: status(0).obj(),
			next: status(1).signed().ready(v1alpha1.ReasonAwaitingApproval, "waiting for approval of egress: a.example:443").pending("a.example:443").obj(),
			want: []string{
				"Normal ImageVerified: SignedByTrustedSigner: signed by trusted signer ci",
				"Normal NotRunning: AwaitingApproval: waiting for approval of egress: a.example:443",
			},
		},
		"approval rolls out": {
			prev: status(1).signed().ready(v1alpha1.ReasonAwaitingApproval, "w").pending("a.example:443").obj(),
			next: status(1).signed().ready(v1alpha1.ReasonProgressing, "waiting").deployed(v1).obj(),
			want: []string{"Normal RolledOut: rolled out " + v1.Image + " (SignedByTrustedSigner, signer ci)"},
		},
		"upgrade waits for approval": {
			prev: running(1, v1).obj(),
			next: status(2).signed().ready(v1alpha1.ReasonRunningPreviousVersion, "p").deployed(v1).pending("static.nbp.pl:443").obj(),
			kept: waiting,
			want: []string{
				"Normal ImageVerified: SignedByTrustedSigner: signed by trusted signer ci",
				"Normal KeptPreviousVersion: keeps running " + v1.Image + ": " + waiting.why,
			},
		},
		"kept: the Deployment becomes available": {
			prev: status(2).signed().ready(v1alpha1.ReasonProgressing, "waiting").deployed(v1).pending("static.nbp.pl:443").obj(),
			next: status(2).signed().ready(v1alpha1.ReasonRunningPreviousVersion, "p").deployed(v1).pending("static.nbp.pl:443").obj(),
			kept: waiting,
		},
		"kept: a narrower approval changes what is pending": {
			prev: status(2).signed().ready(v1alpha1.ReasonRunningPreviousVersion, "p").deployed(v1).pending("a:443", "b:443").obj(),
			next: status(2).signed().ready(v1alpha1.ReasonRunningPreviousVersion, "p").deployed(v1).pending("b:443").obj(),
			kept: waiting,
			want: []string{"Normal KeptPreviousVersion: keeps running " + v1.Image + ": " + waiting.why},
		},
		"kept: an apply fails": {
			prev:        running(1, v1).obj(),
			next:        status(2).sig(metav1.ConditionFalse, v1alpha1.ReasonUnsigned, "no signature").ready(v1alpha1.ReasonProgressing, "applying failed").deployed(v1).obj(),
			kept:        refused,
			applyFailed: true,
			want: []string{
				"Warning ImageRefused: Unsigned: no signature",
				"Warning KeptPreviousVersion: keeps running " + v1.Image + ": " + refused.why,
			},
		},
		"approved upgrade rolls out": {
			prev: status(2).signed().ready(v1alpha1.ReasonRunningPreviousVersion, "p").deployed(v1).pending("static.nbp.pl:443").obj(),
			next: status(2).signed().ready(v1alpha1.ReasonProgressing, "waiting").deployed(v2).obj(),
			want: []string{"Normal RolledOut: rolled out " + v2.Image + " (SignedByTrustedSigner, signer ci)"},
		},
		"a config change is verified again and rolls out": {
			prev: running(1, v1).obj(),
			next: status(2).signed().ready(v1alpha1.ReasonProgressing, "waiting").deployed(record("v1", 300)).obj(),
			want: []string{
				"Normal ImageVerified: SignedByTrustedSigner: signed by trusted signer ci",
				"Normal RolledOut: rolled out " + v1.Image + " (SignedByTrustedSigner, signer ci)",
			},
		},
		"grant deleted": {
			prev: running(2, v2).obj(),
			next: status(2).signed().ready(v1alpha1.ReasonNoGrant, "no PluginGrant named p; nothing runs").pending("x:443").obj(),
			want: []string{"Normal Revoked: " + v2.Image + " was torn down: no PluginGrant named p; nothing runs"},
		},
		"the running version's image is refused now": {
			prev: running(1, v1).obj(),
			next: status(1).sig(metav1.ConditionFalse, v1alpha1.ReasonUntrustedSigner, "signed by mallory").
				ready(v1alpha1.ReasonInvalidPreviousVersion, "the running version's image is refused: signed by mallory").obj(),
			want: []string{
				"Warning ImageRefused: UntrustedSigner: signed by mallory",
				"Warning Stopped: " + v1.Image + " was torn down: InvalidPreviousVersion: the running version's image is refused: signed by mallory",
			},
		},
		"first install refused": {
			prev: status(1).ready(v1alpha1.ReasonNoGrant, "no grant").obj(),
			next: status(1).sig(metav1.ConditionFalse, v1alpha1.ReasonUnsigned, "no signature").ready(v1alpha1.ReasonSignatureNotVerified, "no signature").obj(),
			want: []string{"Warning ImageRefused: Unsigned: no signature"},
		},
		"refused again with another image": {
			prev: status(1).sig(metav1.ConditionFalse, v1alpha1.ReasonUnsigned, "no signature").ready(v1alpha1.ReasonSignatureNotVerified, "x").obj(),
			next: status(2).sig(metav1.ConditionFalse, v1alpha1.ReasonUnsigned, "no signature").ready(v1alpha1.ReasonSignatureNotVerified, "x").obj(),
			want: []string{"Warning ImageRefused: Unsigned: no signature"},
		},
		"registry down, the running version stays": {
			prev: running(1, v1).obj(),
			next: status(1).sig(metav1.ConditionUnknown, v1alpha1.ReasonRegistryUnavailable, "cannot read it").
				ready(v1alpha1.ReasonRunning, "running").deployed(v1).obj(),
			want: []string{"Warning RegistryUnavailable: cannot read it"},
		},
		"registry refuses the read, the running version stays": {
			prev: running(1, v1).obj(),
			next: status(1).sig(metav1.ConditionUnknown, v1alpha1.ReasonRegistryUnauthorized, "refused the anonymous read").
				ready(v1alpha1.ReasonRunning, "running").deployed(v1).obj(),
			want: []string{"Warning RegistryUnauthorized: refused the anonymous read"},
		},
		"registry down, then refusing the read": {
			prev: status(1).sig(metav1.ConditionUnknown, v1alpha1.ReasonRegistryUnavailable, "timeout").ready(v1alpha1.ReasonRunning, "r").deployed(v1).obj(),
			next: status(1).sig(metav1.ConditionUnknown, v1alpha1.ReasonRegistryUnauthorized, "refused").ready(v1alpha1.ReasonRunning, "r").deployed(v1).obj(),
			want: []string{"Warning RegistryUnauthorized: refused"},
		},
		"registry still down, another error": {
			prev: status(1).sig(metav1.ConditionUnknown, v1alpha1.ReasonRegistryUnavailable, "timeout").ready(v1alpha1.ReasonRunning, "r").deployed(v1).obj(),
			next: status(1).sig(metav1.ConditionUnknown, v1alpha1.ReasonRegistryUnavailable, "refused").ready(v1alpha1.ReasonRunning, "r").deployed(v1).obj(),
		},
		"invalid spec on first install": {
			prev: status(0).obj(),
			next: status(1).sig(metav1.ConditionUnknown, v1alpha1.ReasonInvalidSpec, "not checked").ready(v1alpha1.ReasonInvalidSpec, "bad name").obj(),
			want: []string{"Warning NotRunning: InvalidSpec: bad name"},
		},
		"no grant, the spec is edited": {
			prev: status(1).signed().ready(v1alpha1.ReasonNoGrant, "no PluginGrant named p; nothing runs").obj(),
			next: status(2).sig(metav1.ConditionTrue, v1alpha1.ReasonSignedByTrustedSigner, "signed by trusted signer ci").ready(v1alpha1.ReasonNoGrant, "no PluginGrant named p; nothing runs").obj(),
			want: []string{
				"Normal ImageVerified: SignedByTrustedSigner: signed by trusted signer ci",
				"Normal NotRunning: NoGrant: no PluginGrant named p; nothing runs",
			},
		},
		"no grant, the message alone changes": {
			prev: status(1).signed().ready(v1alpha1.ReasonInvalidGrant, "bad a").obj(),
			next: status(1).signed().ready(v1alpha1.ReasonInvalidGrant, "bad b").obj(),
		},
		"cluster unavailable parks": {
			prev: running(1, v1).obj(),
			next: status(1).signed().ready(v1alpha1.ReasonClusterUnavailable, "Service openfief-core: not found").deployed(v1).obj(),
			want: []string{"Warning Parked: Service openfief-core: not found; " + v1.Image +
				" is parked at zero replicas and resumes when the Services are usable again"},
		},
		"cluster unavailable, another message": {
			prev: status(1).signed().ready(v1alpha1.ReasonClusterUnavailable, "a").deployed(v1).obj(),
			next: status(1).signed().ready(v1alpha1.ReasonClusterUnavailable, "b").deployed(v1).obj(),
		},
		"cluster unavailable on first install": {
			prev: status(0).obj(),
			next: status(1).signed().ready(v1alpha1.ReasonClusterUnavailable, "no proxy").obj(),
			want: []string{
				"Normal ImageVerified: SignedByTrustedSigner: signed by trusted signer ci",
				"Warning Parked: no proxy; nothing runs",
			},
		},
		"resumed": {
			prev: status(1).signed().ready(v1alpha1.ReasonClusterUnavailable, "a").deployed(v1).obj(),
			next: status(1).signed().ready(v1alpha1.ReasonProgressing, "waiting").deployed(v1).obj(),
			want: []string{"Normal Resumed: the core's and the proxy's Services are usable again; " + v1.Image + " runs again"},
		},
		"resuming, but the apply fails": {
			prev:        status(1).signed().ready(v1alpha1.ReasonClusterUnavailable, "a").deployed(v1).obj(),
			next:        status(1).signed().ready(v1alpha1.ReasonProgressing, "applying failed").deployed(v1).obj(),
			applyFailed: true,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, e := range pluginEvents(tt.prev, tt.next, tt.kept, tt.applyFailed) {
				got = append(got, e.Type+" "+e.Reason+": "+e.Note)
				if e.Action == "" {
					t.Errorf("%s has no action", e.Reason)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecordEventsCutsNotesAndToleratesNoRecorder(t *testing.T) {
	p := testutil.MakePlugin("cut", testutil.Image("cut-1")).Obj()
	p.Status = *status(1).sig(metav1.ConditionFalse, v1alpha1.ReasonUnsigned, "100% "+strings.Repeat("x", 2*MaxMessageBytes)).obj()
	prev := status(0).obj()

	(&PluginReconciler{}).recordEvents(p, prev, &pass{}) // no recorder: no panic

	rec := events.NewFakeRecorder(10)
	(&PluginReconciler{Recorder: rec}).recordEvents(p, prev, &pass{})
	got := <-rec.Events
	note, ok := strings.CutPrefix(got, "Warning ImageRefused ")
	if !ok || len(note) > MaxMessageBytes || !strings.HasPrefix(note, "Unsigned: 100% xxx") || !strings.HasSuffix(note, "...") {
		t.Errorf("event %.80q... (%d bytes), want a Warning ImageRefused note cut to %d bytes, %% kept", got, len(got), MaxMessageBytes)
	}
}

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
