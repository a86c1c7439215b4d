//go:build cluster

package operator

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/internal/trust"
)

// gatedImages is fakeImages that records the images it is asked about, in
// order, and, while the gate is shut, holds every check but the victim's
// until it opens, as a slow registry would.
type gatedImages struct {
	*fakeImages
	victim string

	mu     sync.Mutex
	shut   bool
	opened chan struct{}
	held   chan struct{} // a check is waiting at the gate
	order  []string      // images checked since the gate opened
}

func (g *gatedImages) shutGate() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shut, g.opened, g.order = true, make(chan struct{}), nil
}

func (g *gatedImages) openGate() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shut = false
	close(g.opened)
}

func (g *gatedImages) checked() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.order...)
}

func (g *gatedImages) Check(ctx context.Context, ref plugins.ImageRef, declared *plugins.Manifest) trust.Verification {
	g.mu.Lock()
	shut, opened := g.shut, g.opened
	g.mu.Unlock()
	if shut && ref.String() != g.victim {
		select {
		case g.held <- struct{}{}:
		default:
		}
		<-opened
	} else {
		g.mu.Lock()
		g.order = append(g.order, ref.String())
		g.mu.Unlock()
	}
	return g.fakeImages.Check(ctx, ref, declared)
}

// TestRevocationGoesAheadOfBacklog: with one worker stuck on a slow check and
// a routine reconcile of every other Plugin queued behind it (a label
// touched each), deleting one Plugin's grant puts that Plugin's reconcile
// first (RevocationPriority, OF-15): once the check returns, the victim is
// the next Plugin checked, before any of the backlog, and its workload goes.
// Without the priority it would come after the whole backlog. It asserts
// order, not time; the latency under load is BenchmarkOperatorScale's.
func TestRevocationGoesAheadOfBacklog(t *testing.T) {
	const n = 30
	c, cl := testCluster(t)
	victim := testutil.MakePlugin("rev-victim", testutil.Image("rev-victim")).Egress("api.nbp.pl").Obj()
	images := &gatedImages{fakeImages: newFakeImages(), victim: testutil.Image("rev-victim"), held: make(chan struct{}, 1)}
	o := DefaultOptions()
	o.Cluster.Gate.Image = testutil.GateImage
	o.Images = images
	o.MaxConcurrentReconciles = 1
	startManager(t, c, 0, func(mgr ctrl.Manager) error {
		_, err := AddToManager(mgr, o)
		return err
	})
	f := &fixture{t: t, cluster: c, cl: cl, images: images.fakeImages}
	f.run(victim)
	backlog := make([]*v1alpha1.Plugin, n)
	for i := range backlog {
		backlog[i] = testutil.MakePlugin(fmt.Sprintf("rev-backlog-%02d", i), testutil.Image(fmt.Sprintf("rev-backlog-%02d", i))).Obj()
		f.images.sign(backlog[i].Spec.Image)
		f.create(backlog[i], testutil.GrantFor(backlog[i]).Obj())
	}
	for _, p := range backlog {
		f.waitPlugin(p.Name, "converged", func(p *v1alpha1.Plugin) (bool, string) {
			return p.Status.ObservedGeneration == p.Generation && p.Status.Deployed != nil, describeJSON(p.Status.Conditions)
		})
	}

	images.shutGate()
	touched := strconv.FormatInt(time.Now().UnixNano(), 10)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"`+touched+`"}}}`))
	for _, p := range backlog {
		if err := cl.Patch(context.Background(), &v1alpha1.Plugin{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: plugins.Namespace}}, patch); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-images.held: // the one worker is stuck; the rest of the backlog queues
	case <-time.After(waitTimeout):
		t.Fatal("no routine reconcile reached the image check")
	}
	f.delete(&v1alpha1.PluginGrant{ObjectMeta: metav1.ObjectMeta{Name: victim.Name, Namespace: plugins.Namespace}})
	// Let the watches deliver the touches and the deletion to the queue.
	// Arriving late could only fail this test, never pass it.
	time.Sleep(2 * time.Second)
	images.openGate()
	f.waitTornDown(victim.Name)

	testutil.Eventually(t, waitTimeout, "the backlog reconciled", func() (bool, string) {
		order := images.checked()
		return len(order) >= n, fmt.Sprintf("%d checks: %v", len(order), order)
	})
	order := images.checked()
	first := -1
	for i, img := range order {
		if img == images.victim {
			first = i
			break
		}
	}
	// The check held at the gate was not recorded; the victim must be the
	// first image checked after it.
	if first != 0 {
		t.Errorf("the revoked Plugin was checked after %d Plugins of the backlog (-1: never); want first", first)
	}
}
