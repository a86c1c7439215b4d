//go:build cluster

package fault

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"
)

// Sizes of the load every test under load runs.
const (
	loadPlugins = 50
	loadWorkers = 10
)

// TestOperatorKilledUnderLoad SIGKILLs the operator at random points while
// 50 plugins install, upgrade, get revoked, re-granted, narrowed and
// uninstalled, restarting it after each kill, then checks that every plugin
// converged to what its spec and grant say, with no duplicate, no orphan
// and no revoked workload, and that the operator then stays quiet: no write
// but lease renewals (OF-4).
//
// Kill points are drawn from the seed: most at the operator's n-th write
// since it started (n up to 120), half of those before the write reaches the
// API server and half after it was applied but before the operator read
// the answer; the rest at a random time up to 4 s after start (during the
// cache sync or the wait for the lease). The replica uses a 3 s lease, so
// each restart waits for the dead incarnation's lease to expire.
func TestOperatorKilledUnderLoad(t *testing.T) {
	p := newPlatform(t)
	rng := rngFor(t)
	plan := drawKills(rng, 8)
	for i, kp := range plan {
		p.logf("kill point %d: %s", i+1, kp)
	}
	r := newReplica(p, "operator", false, fastElection, plan)
	d := &driver{p: p, waitFor: 2 * time.Minute}
	r.ops = d.ops.Load
	r.start()

	load := assign(rng, "k", loadPlugins)
	p.logf("load: %s", describeLoad(load))
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if err := d.run(ctx, load, loadWorkers, rng.Uint64()); err != nil {
		t.Fatalf("load: %v", err)
	}
	left := r.planLeft()
	r.mu.Lock()
	r.plan, r.armed = nil, nil // no more kills
	crashes := r.crashes
	r.mu.Unlock()
	kills := r.killLog()
	p.logf("load done: %d operations; %d kills, %d kill points not reached, %d exits by itself", d.ops.Load(), len(kills), left, crashes)
	if len(kills) < 4 {
		t.Errorf("only %d of %d planned kills happened during the load", len(kills), len(plan))
	}

	p.waitConverged(2*time.Minute, expectations(load))
	p.assertQuiet(r, 3*time.Second)
}

// drawKills draws n kill points.
func drawKills(rng *rand.Rand, n int) []killPoint {
	out := make([]killPoint, n)
	for i := range out {
		kp := killPoint{restartIn: time.Duration(rng.IntN(1500)) * time.Millisecond}
		if rng.IntN(3) == 0 {
			kp.after = time.Duration(300+rng.IntN(3700)) * time.Millisecond
		} else {
			kp.afterWrites = 1 + rng.IntN(120)
			kp.mode = killBefore
			if rng.IntN(2) == 0 {
				kp.mode = killAfter
			}
		}
		out[i] = kp
	}
	return out
}

// expectations maps each plugin of a load to its settled state.
func expectations(load map[string]scenario) map[string]expectation {
	out := make(map[string]expectation, len(load))
	for name, s := range load {
		out[name] = s.expect()
	}
	return out
}

// describeLoad counts the plugins of each scenario.
func describeLoad(load map[string]scenario) string {
	n := map[scenario]int{}
	for _, s := range load {
		n[s]++
	}
	var parts []string
	for s, c := range n {
		parts = append(parts, fmt.Sprintf("%d %s", c, s))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%d plugins: %s", len(load), strings.Join(parts, ", "))
}

// assertQuiet checks that r's tap sees no write but Lease renewals and
// Events for d: a settled operator sends nothing (OF-4).
func (p *platform) assertQuiet(r *replica, d time.Duration) {
	p.t.Helper()
	from := time.Now()
	time.Sleep(d)
	var noisy []string
	for _, w := range r.tap.recorded() {
		if w.at.Before(from) || w.lease || strings.HasPrefix(w.resource, "events") {
			continue
		}
		noisy = append(noisy, w.String())
	}
	if len(noisy) > 0 {
		p.t.Errorf("the settled operator wrote %d times in %s: %v", len(noisy), d, noisy)
		return
	}
	p.logf("quiet: the settled operator sent no write but lease renewals for %s", d)
}
