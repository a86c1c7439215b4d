//go:build cluster

package operator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestRollbackThroughHistory runs the operator as the binary builds it, with
// the real image checker over an in-process registry and real signatures
// by two owner keys, and takes one plugin through upgrades and rollbacks as
// 'openfief plugin rollback' makes them (spec.image and spec.manifest set to
// an earlier revision's image and its signed label):
//
//   - every new image that runs adds a revision to status.history, newest
//     first, and the one it replaced gets its lastRan;
//   - a rollback to an image whose signer is no longer trusted is refused
//     when it is asked for: the image is verified again,
//     and the version that runs keeps running;
//   - a rollback to a version that asks for more than the grant now holds
//     waits for approval, the running version kept, and runs once approved,
//     with a RolledBack Event naming both revisions;
//   - a rollback to the previous revision runs it at once;
//   - the history never holds more than five revisions.
func TestRollbackThroughHistory(t *testing.T) {
	c, cl := testCluster(t)
	ctx := context.Background()
	keyA, keyB := cosigntest.NewKey(t), cosigntest.NewKey(t)
	reg := cosigntest.NewRegistry(t, false)
	narrow := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Egress: []string{"api.example.com"}}
	wide := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Egress: []string{"api.example.com", "files.example.com"}}
	push := func(repo string, m plugins.Manifest, key *cosigntest.Key) (plugins.ImageRef, plugins.Manifest) {
		ref := reg.PushImage(t, repo, cosigntest.ManifestLabel(t, m))
		reg.Sign(t, ref, key)
		return ref, m
	}
	type version struct {
		ref plugins.ImageRef
		m   plugins.Manifest
	}
	var vB, v1, v2, v3, v4 version
	vB.ref, vB.m = push("plugins/rollback-b", narrow, keyB) // signed by owner-b, whom the owner later distrusts
	v1.ref, v1.m = push("plugins/rollback-1", wide, keyA)
	v2.ref, v2.m = push("plugins/rollback-2", narrow, keyA)
	v3.ref, v3.m = push("plugins/rollback-3", narrow, keyA)
	v4.ref, v4.m = push("plugins/rollback-4", narrow, keyA)

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: plugins.OwnerSignersConfigMap, Namespace: plugins.Namespace},
		Data:       map[string]string{plugins.OwnerSignersKey: signersOf(t, map[string]*cosigntest.Key{"owner-a": keyA, "owner-b": keyB})},
	}
	if err := cl.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), cm) })

	o := DefaultOptions()
	o.Cluster.Gate.Image = testutil.GateImage
	o.Images = nil // the binary's own PolicyVerifier over the registry
	startManager(t, c, 0, func(mgr ctrl.Manager) error { _, err := AddToManager(mgr, o); return err })
	f := &fixture{t: t, cluster: c, cl: cl, images: newFakeImages()}

	p := testutil.MakePlugin("rollback", vB.ref.String()).Egress("api.example.com").Obj()
	g := testutil.MakeGrant(p.Name).Capabilities("connector").Egress("api.example.com", "files.example.com").Obj()
	f.create(p, g)
	t.Cleanup(func() { _ = cl.Delete(context.Background(), p); _ = cl.Delete(context.Background(), g) })

	// setVersion does what upgrade and rollback do to the Plugin.
	setVersion := func(v version) {
		t.Helper()
		update(t, cl, p.DeepCopy(), func(p *v1alpha1.Plugin) {
			p.Spec.Image, p.Spec.Manifest = v.ref.String(), apiconv.ManifestToAPI(v.m)
		})
	}
	// waitHistory waits until the Plugin runs image and its history lists
	// exactly the images of want, newest first, numbered newest down.
	waitHistory := func(image string, newest int64, want ...version) *v1alpha1.Plugin {
		t.Helper()
		return f.waitPlugin(p.Name, fmt.Sprintf("runs %s with %d revisions", image, len(want)), func(got *v1alpha1.Plugin) (bool, string) {
			h := got.Status.History
			seen := describeHistory(h)
			if got.Status.ObservedGeneration != got.Generation || f.runningImage(p.Name) != image || len(h) != len(want) {
				return false, "runs " + f.runningImage(p.Name) + "; history " + seen
			}
			for i, v := range want {
				if h[i].Image != v.ref.String() || h[i].Revision != newest-int64(i) ||
					h[i].ManifestDigest != plugins.ManifestDigest(v.m) || (i > 0) != (h[i].LastRan != nil) {
					return false, "history " + seen
				}
			}
			return true, ""
		})
	}
	signature := func(got *v1alpha1.Plugin) (metav1.ConditionStatus, string, string) {
		if sc := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionSignatureVerified); sc != nil {
			return sc.Status, sc.Reason, sc.Message
		}
		return "", "", ""
	}

	// Revision 1 (signed by owner-b), then two upgrades.
	got := waitHistory(vB.ref.String(), 1, vB)
	if r := got.Status.History[0]; r.Signer != "owner-b" || r.Trust != v1alpha1.ReasonSignedByTrustedSigner || r.FirstRan.IsZero() {
		t.Errorf("revision 1 = %+v, want signer owner-b, SignedByTrustedSigner, firstRan set", r)
	}
	setVersion(v1)
	waitHistory(v1.ref.String(), 2, v1, vB)
	setVersion(v2)
	waitHistory(v2.ref.String(), 3, v2, v1, vB)

	// The owner stops trusting owner-b; a rollback to revision 1 is
	// refused when asked for, and revision 3 keeps running.
	update(t, cl, cm, func(cm *corev1.ConfigMap) {
		cm.Data = map[string]string{plugins.OwnerSignersKey: signersOf(t, map[string]*cosigntest.Key{"owner-a": keyA})}
	})
	setVersion(vB)
	// Refused as UntrustedSigner when the verifier still holds owner-b's
	// verified signature, else as Unsigned (no trusted key verifies it):
	// either way refused (see TestOwnerSignersChangeLive).
	got = f.waitPlugin(p.Name, "rollback to owner-b's image refused", func(got *v1alpha1.Plugin) (bool, string) {
		status, reason, msg := signature(got)
		return got.Status.ObservedGeneration == got.Generation && status == metav1.ConditionFalse &&
			(reason == v1alpha1.ReasonUntrustedSigner || reason == v1alpha1.ReasonUnsigned), reason + ": " + msg
	})
	if img := f.runningImage(p.Name); img != v2.ref.String() {
		t.Errorf("after the refused rollback the Deployment runs %q, want revision 3's %s", img, v2.ref)
	}
	if len(got.Status.History) != 3 || got.Status.History[0].Revision != 3 {
		t.Errorf("the refused rollback changed the history: %s", describeHistory(got.Status.History))
	}
	if got.Status.Deployed == nil || got.Status.Deployed.Image != v2.ref.String() {
		t.Errorf("status.deployed = %+v, want revision 3's image", got.Status.Deployed)
	}

	// The owner narrows the grant to what revision 3 asks for; a rollback to
	// revision 2, which asked for one more host, waits for approval.
	update(t, cl, g.DeepCopy(), func(g *v1alpha1.PluginGrant) { g.Spec.Egress = []v1alpha1.EgressHost{"api.example.com"} })
	setVersion(v1)
	got = f.waitPlugin(p.Name, "rollback to revision 2 waits for approval", func(got *v1alpha1.Plugin) (bool, string) {
		pa := got.Status.PendingApproval
		return got.Status.ObservedGeneration == got.Generation && pa != nil && slices.Equal(pa.Egress, []string{"files.example.com:443"}),
			"pending " + describeJSON(pa)
	})
	if ar := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionApprovalRequired); ar == nil || ar.Status != metav1.ConditionTrue {
		t.Errorf("ApprovalRequired = %+v, want True", ar)
	}
	if _, reason, msg := signature(got); reason != v1alpha1.ReasonSignedByTrustedSigner {
		t.Errorf("revision 2's image at rollback: %s: %s, want SignedByTrustedSigner", reason, msg)
	}
	if img := f.runningImage(p.Name); img != v2.ref.String() {
		t.Errorf("while the rollback waits the Deployment runs %q, want revision 3's %s", img, v2.ref)
	}
	if len(got.Status.History) != 3 {
		t.Errorf("a rollback waiting for approval changed the history: %s", describeHistory(got.Status.History))
	}
	update(t, cl, g.DeepCopy(), func(g *v1alpha1.PluginGrant) {
		g.Spec.Egress = []v1alpha1.EgressHost{"api.example.com", "files.example.com"}
	})
	waitHistory(v1.ref.String(), 4, v1, v2, v1, vB)
	waitEvent(t, cl, p.Name, EventRolledBack, "rolled back to the image of revision 2, "+v1.ref.String()+", now revision 4")

	// A rollback to the previous revision runs at once.
	setVersion(v2)
	waitHistory(v2.ref.String(), 5, v2, v1, v2, v1, vB)
	waitEvent(t, cl, p.Name, EventRolledBack, "rolled back to the image of revision 3, "+v2.ref.String()+", now revision 5")

	// Two more upgrades: the history keeps the newest five.
	setVersion(v3)
	waitHistory(v3.ref.String(), 6, v3, v2, v1, v2, v1)
	setVersion(v4)
	got = waitHistory(v4.ref.String(), 7, v4, v3, v2, v1, v2)
	if n := len(got.Status.History); n != v1alpha1.MaxPluginHistory {
		t.Errorf("history holds %d revisions, want %d", n, v1alpha1.MaxPluginHistory)
	}
}

// describeHistory renders a history for a failure message.
func describeHistory(h []v1alpha1.PluginRevision) string {
	var parts []string
	for _, r := range h {
		last := "-"
		if r.LastRan != nil {
			last = r.LastRan.UTC().Format("15:04:05")
		}
		parts = append(parts, fmt.Sprintf("%d %s (last %s)", r.Revision, r.Image, last))
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// waitEvent waits for an Event of reason on the Plugin name whose note is
// note.
func waitEvent(t *testing.T, cl client.Client, name, reason, note string) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, "a "+reason+" Event on "+name, func() (bool, string) {
		var list eventsv1.EventList
		if err := cl.List(context.Background(), &list, client.InNamespace(plugins.Namespace)); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Plugin" && e.Regarding.Name == name && e.Reason == reason {
				if e.Note == note {
					return true, ""
				}
				seen = append(seen, e.Note)
			}
		}
		return false, fmt.Sprintf("%s Events: %q", reason, seen)
	})
}
