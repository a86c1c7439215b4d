package operator

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// BenchmarkOperatorScale installs 500 Plugins with grants on the real API
// server, starts the operator cold and reports:
//   - converge-s: seconds until every Plugin's status describes its
//     generation with its workload applied;
//   - writes/reconcile: writes the operator sent after a label touched every
//     Plugin and grant once (each touch reconciles), divided by those
//     reconciles; the target is 0 (OF-4);
//   - peak-RSS-MiB: the process's peak resident memory (VmHWM). The operator
//     runs in the test process, so this bounds it from above.
//
// The verifier is the test stub, so registry reads are not in the figures;
// the operator's client runs at 100 QPS. Run with `make bench-operator`.
func BenchmarkOperatorScale(b *testing.B) {
	const n = 500
	c, cl := testCluster(b)
	ctx := context.Background()
	images := newFakeImages()
	names := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		names[i] = fmt.Sprintf("scale-%03d", i)
		p := testutil.MakePlugin(names[i], testutil.Image(names[i])).Egress("api.nbp.pl").Obj()
		images.sign(p.Spec.Image)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := cl.Create(ctx, p); err != nil {
				b.Error(err)
			}
			if err := cl.Create(ctx, testutil.GrantFor(p).Obj()); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		return
	}

	for b.Loop() {
		start := time.Now()
		run := startOperatorQPS(b, c, images, 100)
		testutil.Eventually(b, 10*time.Minute, "all plugins converged", func() (bool, string) {
			var list v1alpha1.PluginList
			if err := cl.List(ctx, &list, client.InNamespace(plugins.Namespace)); err != nil {
				return false, err.Error()
			}
			done := 0
			for _, p := range list.Items {
				if strings.HasPrefix(p.Name, "scale-") && p.Status.ObservedGeneration == p.Generation && p.Status.Deployed != nil {
					done++
				}
			}
			return done == n, fmt.Sprintf("%d of %d", done, n)
		})
		converge := time.Since(start)
		time.Sleep(2 * time.Second)

		before := run.writes.writes.Load()
		touched := strconv.FormatInt(time.Now().UnixNano(), 10)
		for _, name := range names {
			label(b, cl, testutil.MakePlugin(name, "").Obj(), "touched", touched)
		}
		time.Sleep(5 * time.Second)
		writes := run.writes.writes.Load() - before
		run.stop()

		b.ReportMetric(converge.Seconds(), "converge-s")
		b.ReportMetric(float64(writes)/float64(n), "writes/reconcile")
		b.ReportMetric(peakRSSMiB(), "peak-RSS-MiB")
	}
}

// peakRSSMiB reads VmHWM from /proc/self/status.
func peakRSSMiB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }() // opened read-only: a failed Close loses nothing
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}
