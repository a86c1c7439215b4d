//go:build cluster

package operator

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/internal/trust"
)

// refusingImages is an image checker over inner whose registry, while
// refusing, answers every read 401: each check is
// Unknown/RegistryUnauthorized, as PolicyVerifier reports it.
type refusingImages struct {
	inner    trust.ImageChecker
	refusing atomic.Bool
}

func (r *refusingImages) Check(ctx context.Context, ref plugins.ImageRef, declared *plugins.Manifest) trust.Verification {
	if r.refusing.Load() {
		return trust.Verification{Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonRegistryUnauthorized,
			Message: "the registry refused the anonymous read of " + ref.String() + " (test)"}
	}
	return r.inner.Check(ctx, ref, declared)
}

// TestRegistryUnauthorizedFailsStatic checks that a registry refusing the
// read (RegistryUnauthorized) is handled as one that is down: the
// verified running version keeps running, a new version is not deployed
// until the registry lets it be read.
func TestRegistryUnauthorizedFailsStatic(t *testing.T) {
	f := newFixture(t)
	f.operator.stop()
	images := &refusingImages{inner: f.images}
	f.operator = startOperator(t, f.cluster, images)

	p := testutil.MakePlugin("unauthorized", testutil.Image("unauthorized-1")).Obj()
	f.run(p)
	f.waitReadyAvailable(p.Name, v1alpha1.ReasonRunning)

	// The registry starts refusing the operator's read.
	images.refusing.Store(true)
	label(t, f.cl, p.DeepCopy(), "retry", "now") // sooner than the registry retry
	got := f.waitPlugin(p.Name, "RegistryUnauthorized seen", func(p *v1alpha1.Plugin) (bool, string) {
		sv := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionSignatureVerified)
		return sv != nil && sv.Status == metav1.ConditionUnknown && sv.Reason == v1alpha1.ReasonRegistryUnauthorized, describeJSON(sv)
	})
	sv := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionSignatureVerified)
	if !strings.Contains(sv.Message, "keeps running") {
		t.Errorf("SignatureVerified message %q does not say the verified version keeps running", sv.Message)
	}
	f.waitReadyAvailable(p.Name, v1alpha1.ReasonRunning)
	if img := f.runningImage(p.Name); img != p.Spec.Image {
		t.Fatalf("the Deployment runs %q while the registry refuses the read, want the verified %s", img, p.Spec.Image)
	}

	// A new version (signed, but unreadable) is not deployed.
	next := testutil.Image("unauthorized-2")
	f.images.sign(next)
	update(t, f.cl, p.DeepCopy(), func(p *v1alpha1.Plugin) { p.Spec.Image = next })
	got = f.waitReadyAvailable(p.Name, v1alpha1.ReasonRunningPreviousVersion)
	sv = apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionSignatureVerified)
	if sv == nil || sv.Status != metav1.ConditionUnknown || sv.Reason != v1alpha1.ReasonRegistryUnauthorized || sv.ObservedGeneration != got.Generation {
		t.Errorf("SignatureVerified of the new version = %s, want Unknown/RegistryUnauthorized", describeJSON(sv))
	}
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if img := f.runningImage(p.Name); img != p.Spec.Image {
			t.Fatalf("the Deployment runs %q while the registry refuses the read, want the verified %s", img, p.Spec.Image)
		}
	}

	// The registry lets the operator read again: the new version rolls out.
	images.refusing.Store(false)
	label(t, f.cl, p.DeepCopy(), "retry", "again")
	testutil.Eventually(t, waitTimeout, "the new version deployed", func() (bool, string) {
		img := f.runningImage(p.Name)
		return img == next, img
	})
}
