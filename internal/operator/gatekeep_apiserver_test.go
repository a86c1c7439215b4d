//go:build cluster

package operator

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestPlatformUpgradeKeepsRunningGate checks what a new isolation gate
// image (a platform upgrade's: each release pins its own probe digest)
// does to running plugins: nothing, when it is the same probe repository —
// their Deployments are not written, so nothing restarts — while a new
// plugin, and a running one's next rollout, take the new gate; a gate of
// another repository is applied to every plugin at once.
func TestPlatformUpgradeKeepsRunningGate(t *testing.T) {
	f := newFixture(t)
	p := testutil.MakePlugin("gate-kept", testutil.Image("gate-kept-1")).Egress("api.nbp.pl").Obj()
	f.run(p)
	before := f.deployment(p.Name)
	if got := runningGateImage(before); got != testutil.GateImage {
		t.Fatalf("the first gate is %q, want %q", got, testutil.GateImage)
	}

	// The platform upgrade: the operator restarts with the new release's
	// probe as its gate.
	f.operator.stop()
	released := "registry.example.com/openfief/check-probe@" + testutil.Digest("check-probe, released again")
	f.operator = startOperatorWithGate(t, f, released)
	q := testutil.MakePlugin("gate-new", testutil.Image("gate-new-1")).Egress("api.nbp.pl").Obj()
	f.run(q)
	if got := runningGateImage(f.deployment(q.Name)); got != released {
		t.Errorf("a plugin installed after the upgrade has gate %q, want %q", got, released)
	}
	f.waitReady(p.Name, v1alpha1.ReasonProgressing)
	after := f.deployment(p.Name)
	if after.Generation != before.Generation || runningGateImage(after) != testutil.GateImage {
		t.Errorf("the running plugin's Deployment was rewritten by the upgrade: generation %d → %d, gate %q → %q",
			before.Generation, after.Generation, testutil.GateImage, runningGateImage(after))
	}

	// Its next rollout takes the new gate.
	v2 := testutil.Image("gate-kept-2")
	f.images.sign(v2)
	update(t, f.cl, p.DeepCopy(), func(p *v1alpha1.Plugin) { p.Spec.Image = v2 })
	testutil.Eventually(t, waitTimeout, "the new version with the new gate", func() (bool, string) {
		d := f.deployment(p.Name)
		return d.Spec.Template.Spec.Containers[0].Image == v2 && runningGateImage(d) == released,
			"image " + d.Spec.Template.Spec.Containers[0].Image + ", gate " + runningGateImage(d)
	})

	// A gate of another repository is never kept.
	f.operator.stop()
	other := "registry.example.com/elsewhere/check-probe@" + testutil.Digest("check-probe elsewhere")
	f.operator = startOperatorWithGate(t, f, other)
	for _, name := range []string{p.Name, q.Name} {
		testutil.Eventually(t, waitTimeout, name+"'s gate from the other repository", func() (bool, string) {
			got := runningGateImage(f.deployment(name))
			return got == other, "gate " + got
		})
	}
}

// startOperatorWithGate is startOperator with gate as the isolation gate
// image.
func startOperatorWithGate(t *testing.T, f *fixture, gate string) *operatorRun {
	t.Helper()
	o := DefaultOptions()
	o.Cluster.Gate.Image = gate
	o.Images = f.images
	return startManager(t, f.cluster, 0, func(mgr ctrl.Manager) error {
		_, err := AddToManager(mgr, o)
		return err
	})
}

// deployment reads the plugin's Deployment from the API server.
func (f *fixture) deployment(name string) *appsv1.Deployment {
	f.t.Helper()
	var d appsv1.Deployment
	if !f.exists(name, &d) {
		f.t.Fatalf("no Deployment for %s", name)
	}
	return &d
}
