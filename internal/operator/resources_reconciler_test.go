//go:build cluster

package operator

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestUpgradeAskingMoreMemoryKeepsPreviousVersion: a new version whose
// manifest asks for more memory than the grant approves waits in
// status.pendingApproval.resources while the previous one keeps running
// with the defaults; approving it in the grant rolls the new version out
// with the memory (plus /tmp) as its container's limit, and
// status.effective.resources says so.
func TestUpgradeAskingMoreMemoryKeepsPreviousVersion(t *testing.T) {
	f := newFixture(t)
	v1 := testutil.MakePlugin("bigger", testutil.Image("bigger-1")).Egress("api.nbp.pl").Obj()
	f.run(v1)
	grant := testutil.MakeGrant(v1.Name).Obj()

	v2image := testutil.Image("bigger-2")
	f.images.sign(v2image)
	update(t, f.cl, v1.DeepCopy(), func(p *v1alpha1.Plugin) {
		p.Spec.Image = v2image
		p.Spec.Manifest.Resources = &v1alpha1.Resources{Memory: "512Mi"}
	})
	f.waitPlugin(v1.Name, "pending lists the memory", func(p *v1alpha1.Plugin) (bool, string) {
		pa := p.Status.PendingApproval
		return p.Status.ObservedGeneration == p.Generation && pa != nil && pa.Resources != nil && *pa.Resources == (v1alpha1.Resources{Memory: "512Mi"}) &&
			len(pa.Egress) == 0, "pending " + describeJSON(pa)
	})
	if img := f.runningImage(v1.Name); img != v1.Spec.Image {
		t.Errorf("Deployment runs %q, want the previous %s", img, v1.Spec.Image)
	}
	if got := memoryLimit(f, v1.Name); got != "192Mi" {
		t.Errorf("the previous version's memory limit is %s, want the default 192Mi", got)
	}

	update(t, f.cl, grant.DeepCopy(), func(g *v1alpha1.PluginGrant) { g.Spec.Resources = &v1alpha1.Resources{Memory: "512Mi"} })
	testutil.Eventually(t, waitTimeout, "new version deployed with 512Mi", func() (bool, string) {
		img, mem := f.runningImage(v1.Name), memoryLimit(f, v1.Name)
		return img == v2image && mem == "576Mi", img + " " + mem
	})
	f.waitPlugin(v1.Name, "effective resources", func(p *v1alpha1.Plugin) (bool, string) {
		e := p.Status.Effective
		return e != nil && e.Resources != nil && *e.Resources == (v1alpha1.Resources{Memory: "512Mi", CPU: "500m", Tmp: "64Mi"}) &&
			p.Status.PendingApproval == nil, "effective " + describeJSON(e)
	})
}

// memoryLimit is the plugin container's memory limit, "" without one.
func memoryLimit(f *fixture, name string) string {
	var dep appsv1.Deployment
	if !f.exists(name, &dep) || len(dep.Spec.Template.Spec.Containers) == 0 {
		return ""
	}
	q, ok := dep.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]
	if !ok {
		return ""
	}
	return q.String()
}
