//go:build cluster

package operator

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/internal/trust"
)

// stallingImages is fakeImages except that checking stall's image blocks
// until the reconcile's context ends, as a registry that never answers or a
// ruinous check would.
type stallingImages struct {
	*fakeImages
	stall   string
	stalled chan struct{}
}

func (s *stallingImages) Check(ctx context.Context, ref plugins.ImageRef, declared *plugins.Manifest) trust.Verification {
	if ref.String() == s.stall {
		select {
		case s.stalled <- struct{}{}:
		default:
		}
		<-ctx.Done()
	}
	return s.fakeImages.Check(ctx, ref, declared)
}

// TestSlowPluginDoesNotBlockRevocation is the operator half of a
// regression test: reconciles were serial, so one
// Plugin whose check took minutes held up every other Plugin, revocations
// included. With several workers a revocation goes through while a check
// stalls, and the stalled reconcile ends at its deadline.
func TestSlowPluginDoesNotBlockRevocation(t *testing.T) {
	c, cl := testCluster(t)
	images := &stallingImages{fakeImages: newFakeImages(), stall: testutil.Image("stalls"), stalled: make(chan struct{}, 1)}
	o := DefaultOptions()
	o.Cluster.Gate.Image = testutil.GateImage
	o.Images = images
	o.ReconcileTimeout = 2 * time.Second
	startManager(t, c, 0, func(mgr ctrl.Manager) error {
		_, err := AddToManager(mgr, o)
		return err
	})
	f := &fixture{t: t, cluster: c, cl: cl, images: images.fakeImages}

	fast := testutil.MakePlugin("conc-fast", testutil.Image("conc-fast")).Obj()
	f.run(fast)

	slow := testutil.MakePlugin("conc-slow", images.stall).Obj()
	f.images.sign(slow.Spec.Image)
	f.create(slow, testutil.GrantFor(slow).Obj())
	<-images.stalled // a worker is now stuck on the slow Plugin

	f.delete(&v1alpha1.PluginGrant{ObjectMeta: metav1.ObjectMeta{Name: fast.Name, Namespace: plugins.Namespace}})
	f.waitTornDown(fast.Name)
	if f.exists(slow.Name, &appsv1.Deployment{}) {
		t.Error("the stalled Plugin was deployed")
	}
	// The stalled reconcile ends at its 2 s deadline and is tried again:
	// the checker is asked a second time.
	select {
	case <-images.stalled:
	case <-time.After(waitTimeout):
		t.Error("the stalled reconcile was not cut short and retried")
	}
}
