//go:build cluster

package operator

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/arkadiuss/openfief/internal/operator/operatortest"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestStoppedLeaderHandsOver runs two managers built with the operator's
// own ManagerOptions (its default Lease timing, 15 s) on one Lease, stops
// the leader as a rollout would, and checks that it released the Lease and
// the standby leads at once, well before the old leader's Lease would have
// run out. Before the release, a rollout left the operator without a leader
// for up to the Lease's duration.
func TestStoppedLeaderHandsOver(t *testing.T) {
	c, cl := testCluster(t)
	const lease = "openfief-operator-handover"
	o := DefaultOptions()
	o.LeaderElection, o.MetricsBindAddress, o.HealthProbeBindAddress = true, "0", ""
	leading := map[string]chan struct{}{"first": make(chan struct{}), "second": make(chan struct{})}
	start := func(name string) *operatortest.Run {
		return operatortest.Start(t, c.Config, operatortest.Options{
			Manager: func(s *runtime.Scheme) ctrl.Options {
				opts := o.ManagerOptions(s)
				opts.LeaderElectionID = lease
				return opts
			},
			// A runnable that needs the lead: it runs only on the leader.
			Setup: func(mgr ctrl.Manager) error {
				return mgr.Add(ctrl.RunnableFunc(func(ctx context.Context) error {
					close(leading[name])
					<-ctx.Done()
					return nil
				}))
			},
		})
	}
	read := func() coordinationv1.Lease {
		var l coordinationv1.Lease
		if err := cl.Get(t.Context(), types.NamespacedName{Namespace: plugins.Namespace, Name: lease}, &l); err != nil {
			t.Fatal(err)
		}
		return l
	}

	first := start("first")
	select {
	case <-leading["first"]:
	case <-time.After(time.Minute):
		t.Fatal("the first manager did not lead within a minute")
	}
	second := start("second")
	defer second.Stop()
	held := read()
	if held.Spec.HolderIdentity == nil || *held.Spec.HolderIdentity == "" || held.Spec.LeaseDurationSeconds == nil {
		t.Fatalf("the Lease has no holder while the first manager leads: %+v", held.Spec)
	}
	expires := held.Spec.RenewTime.Add(time.Duration(*held.Spec.LeaseDurationSeconds) * time.Second)

	first.Stop()
	released := read()
	if h := released.Spec.HolderIdentity; h != nil && *h == *held.Spec.HolderIdentity {
		t.Fatalf("the stopped leader still holds the Lease (holder %q): it did not release it", *h)
	}
	select {
	case <-leading["second"]:
	case <-time.After(time.Minute):
		t.Fatal("the second manager did not lead within a minute of the first stopping")
	}
	took := read()
	if took.Spec.AcquireTime == nil || !took.Spec.AcquireTime.Time.Before(expires) {
		t.Errorf("the second manager acquired the Lease at %v, not before the first's ran out at %v", took.Spec.AcquireTime, expires)
	}
}
