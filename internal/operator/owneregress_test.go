//go:build cluster

package operator

import (
	"context"
	"fmt"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestOwnerHostReachesAllowList checks a host of the owner's choosing (OF-36)
// end to end on a real API server: it reaches the plugin's allow-list and
// opens the proxy rule; a grant with more of them than the manifest has slots
// runs nothing; and an upgrade to a version without the slot keeps the
// previous version, saying why the new one cannot run.
func TestOwnerHostReachesAllowList(t *testing.T) {
	f := newFixture(t)
	p := testutil.MakePlugin("webdav", testutil.Image("webdav-1")).Capabilities("view").OwnerEgress(1).Obj()
	grant := testutil.MakeGrant(p.Name).Capabilities("view").OwnerEgress("Cloud.Example.com").Obj()
	f.images.sign(p.Spec.Image)
	f.create(p, grant)
	got := f.waitReady(p.Name, v1alpha1.ReasonProgressing)
	testutil.Eventually(t, waitTimeout, "allow-list cloud.example.com:443", func() (bool, string) {
		v, ok := f.allowList(p.Name)
		return ok && v == "cloud.example.com:443\n", fmt.Sprintf("allow-list = %q (present %v)", v, ok)
	})
	if e := got.Status.Effective; e == nil || len(e.Egress) != 1 || e.Egress[0] != "cloud.example.com:443" {
		t.Errorf("status.effective = %s, want the owner's host", describeJSON(e))
	}
	if got.Status.PendingApproval != nil {
		t.Errorf("pending = %s, want nothing: an owner host is never pending", describeJSON(got.Status.PendingApproval))
	}
	var np networkingv1.NetworkPolicy
	f.exists(p.Name, &np)
	if len(np.Spec.Egress) != 2 {
		t.Errorf("NetworkPolicy has %d egress rules, want 2 (the core and the proxy)", len(np.Spec.Egress))
	}

	// A second host for one slot: refused whole, nothing runs.
	update(t, f.cl, grant.DeepCopy(), func(g *v1alpha1.PluginGrant) {
		g.Spec.OwnerEgress = append(g.Spec.OwnerEgress, "nas.example.org")
	})
	got = f.waitReady(p.Name, v1alpha1.ReasonInvalidGrant)
	if c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c.Message, "more hosts of the owner's choosing than the manifest allows: 2") {
		t.Errorf("Ready message %q does not say why", c.Message)
	}
	f.waitTornDown(p.Name)
	if v, ok := f.allowList(p.Name); ok && v != "" {
		t.Errorf("allow-list = %q after the grant was refused, want nothing", v)
	}

	// Back to one host: it runs again. Then the vendor's next version drops
	// the slot: the previous version keeps running with the owner's host.
	update(t, f.cl, grant.DeepCopy(), func(g *v1alpha1.PluginGrant) {
		g.Spec.OwnerEgress = []v1alpha1.EgressHost{"cloud.example.com"}
	})
	f.waitReady(p.Name, v1alpha1.ReasonProgressing)
	v2image := testutil.Image("webdav-2")
	f.images.sign(v2image)
	update(t, f.cl, p.DeepCopy(), func(p *v1alpha1.Plugin) {
		p.Spec.Image = v2image
		p.Spec.Manifest.OwnerEgress = 0
	})
	// Minimal mode has no Deployment controller, so Ready stays Progressing;
	// the KeptPreviousVersion Event says why the new version does not run.
	f.waitPlugin(p.Name, "the previous version kept", func(got *v1alpha1.Plugin) (bool, string) {
		d := got.Status.Deployed
		return got.Status.ObservedGeneration == got.Generation && d != nil && d.Image == p.Spec.Image, describeJSON(d)
	})
	testutil.Eventually(t, waitTimeout, "a KeptPreviousVersion Event naming the slots", func() (bool, string) {
		var notes []string
		for _, e := range f.pluginEventsOf(p) {
			if e.Reason == EventKeptPreviousVersion && strings.Contains(e.Note, "the current spec cannot run") && strings.Contains(e.Note, "the manifest allows 0") {
				return true, ""
			}
			notes = append(notes, e.Reason+": "+e.Note)
		}
		return false, strings.Join(notes, "; ")
	})
	if img := f.runningImage(p.Name); img != p.Spec.Image {
		t.Errorf("Deployment runs %q, want the previous %s", img, p.Spec.Image)
	}
	// Opening hosts lands with the allow-list writer's next batch (OF-15).
	testutil.Eventually(t, waitTimeout, "the previous version's allow-list", func() (bool, string) {
		v, _ := f.allowList(p.Name)
		return v == "cloud.example.com:443\n", fmt.Sprintf("allow-list = %q", v)
	})
}

// TestCRDSchemaBoundsOwnerEgress checks the API server itself refuses owner
// egress slots outside 0 to 8 and a grant with more than eight owner hosts.
func TestCRDSchemaBoundsOwnerEgress(t *testing.T) {
	_, cl := testCluster(t)
	ctx := context.Background()
	for name, slots := range map[string]int32{"nine slots": 9, "negative slots": -1} {
		t.Run(name, func(t *testing.T) {
			p := testutil.MakePlugin("slots-"+strings.ReplaceAll(name, " ", "-"), testutil.Image("slots")).OwnerEgress(slots).Obj()
			if err := cl.Create(ctx, p); !apierrors.IsInvalid(err) {
				t.Fatalf("create = %v, want the API server to refuse it as invalid", err)
			}
		})
	}
	if err := cl.Create(ctx, testutil.MakePlugin("slots-eight", testutil.Image("slots8")).OwnerEgress(8).Obj()); err != nil {
		t.Errorf("eight slots refused: %v", err)
	}
	many := testutil.MakeGrant("owner-hosts-nine")
	for i := range 9 {
		many.OwnerEgress(fmt.Sprintf("h%d.example.com", i))
	}
	if err := cl.Create(ctx, many.Obj()); !apierrors.IsInvalid(err) {
		t.Errorf("create a grant with nine owner hosts = %v, want it refused as invalid", err)
	}
	if err := cl.Create(ctx, testutil.MakeGrant("owner-hosts-bad").OwnerEgress("*.example.com").Obj()); !apierrors.IsInvalid(err) {
		t.Errorf("create a grant with a wildcard owner host = %v, want it refused as invalid", err)
	}
}
