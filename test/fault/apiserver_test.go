//go:build cluster

package fault

import (
	"context"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// TestAPIServerRestartedUnderLoad runs the same load as
// TestOperatorKilledUnderLoad while the control plane's API server goes
// away twice: first kube-apiserver alone, stopped gracefully (SIGTERM, 3 s
// grace), then kube-apiserver and etcd together, SIGKILLed; each stays down
// for a random while and comes back on the same ports and data. The
// operator talks to the API server directly with controller-runtime's
// default election timing (15 s lease, 10 s renew deadline), so it may ride
// out an outage or lose its lease and exit; it is restarted when it exits,
// as its pod would be. Afterwards every plugin must have converged as
// before.
//
// What kube-controller-manager's garbage collector leaves behind is
// reported rather than failed on (platform.tolerateGCLeaks): ReplicaSets
// and pods whose owner was deleted while the collector's informers were
// still backing off after an outage, which it then never collects. Two
// shapes were seen: a plugin revoked and granted again keeps its old
// ReplicaSet and pod (the operator deletes the Deployment with background
// propagation and re-creates it under the same name, so the collector's
// name-keyed informer sees an update, never a delete; reproduced with plain
// Deployments, and foreground deletion does not leak), and an uninstalled
// plugin keeps a pod of its deleted ReplicaSet. Everything the operator
// writes stays strictly checked.
func TestAPIServerRestartedUnderLoad(t *testing.T) {
	p := newPlatform(t)
	p.tolerateGCLeaks = true
	rng := rngFor(t)
	r := newReplica(p, "operator", true, leaderTiming{lease: 15 * time.Second, renew: 10 * time.Second, retry: 2 * time.Second}, nil)
	d := &driver{p: p, waitFor: 3 * time.Minute}
	r.ops = d.ops.Load
	r.start()

	restarts := []devcluster.RestartOptions{
		{Grace: 3 * time.Second, Down: time.Duration(500+rng.IntN(1500)) * time.Millisecond},
		{Etcd: true, Kill: true, Down: time.Duration(500+rng.IntN(1500)) * time.Millisecond},
	}
	gaps := []time.Duration{time.Duration(3000+rng.IntN(4000)) * time.Millisecond, time.Duration(4000+rng.IntN(4000)) * time.Millisecond}
	for i, o := range restarts {
		p.logf("restart %d: %s after the previous one (or the load's start): %s", i+1, gaps[i], describeRestart(o))
	}
	load := assign(rng, "a", loadPlugins)
	p.logf("load: %s", describeLoad(load))
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()

	restarted := make(chan error, 1)
	go func() {
		for i, o := range restarts {
			select {
			case <-ctx.Done():
				restarted <- ctx.Err()
				return
			case <-time.After(gaps[i]):
			}
			began := time.Now()
			p.logf("RESTART %d: %s; load driver at %d operations", i+1, describeRestart(o), d.ops.Load())
			if err := p.cluster.RestartAPIServer(ctx, o); err != nil {
				restarted <- err
				return
			}
			p.logf("RESTART %d done: the API server answers again after %s; load driver at %d operations",
				i+1, time.Since(began).Round(10*time.Millisecond), d.ops.Load())
		}
		restarted <- nil
	}()
	loadErr := d.run(ctx, load, loadWorkers, rng.Uint64())
	if err := <-restarted; err != nil {
		t.Fatalf("restarting the API server: %v", err)
	}
	if loadErr != nil {
		t.Fatalf("load: %v", loadErr)
	}
	r.mu.Lock()
	crashes := r.crashes
	r.mu.Unlock()
	p.logf("load done: %d operations; the operator exited by itself %d times (lost its lease)", d.ops.Load(), crashes)
	p.waitConverged(2*time.Minute, expectations(load))
}

func describeRestart(o devcluster.RestartOptions) string {
	what := "kube-apiserver"
	if o.Etcd {
		what += " and etcd"
	}
	how := "SIGTERM (grace " + o.Grace.String() + ")"
	if o.Kill {
		how = "SIGKILL"
	}
	return what + " stopped with " + how + ", down for " + o.Down.String()
}
