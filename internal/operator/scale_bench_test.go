package operator

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// scalePlugins is how many Plugins BenchmarkOperatorScale installs
// (make bench-operator: 500; make bench-scale: 10,000).
var scalePlugins = flag.Int("scale-plugins", 500, "Plugins BenchmarkOperatorScale installs")

// BenchmarkOperatorScale installs -scale-plugins Plugins (500 by default)
// with grants on the real API server, starts the operator cold and reports:
//   - converge-s: seconds until every Plugin's status describes its
//     generation with its workload applied;
//   - writes/reconcile: writes the operator sent after a label touched every
//     Plugin and grant once (each touch reconciles), divided by those
//     reconciles; the target is 0 (OF-4);
//   - revoke-s: seconds from deleting one Plugin's grant, right after a
//     label touched every Plugin again (so their reconciles are queued),
//     until that Plugin's Deployment is gone (issue 18: under 2 s with
//     10,000 Plugins; RevocationPriority puts it ahead of the queue);
//   - peak-RSS-MiB: the process's peak resident memory (VmHWM). The operator
//     runs in the test process, so this bounds it from above.
//
// The verifier is the test stub, so registry reads are not in the figures;
// the operator's client runs at 100 QPS. Run with `make bench-operator`.
func BenchmarkOperatorScale(b *testing.B) {
	n := *scalePlugins
	c, cl := testCluster(b)
	ctx := context.Background()
	images := newFakeImages()
	names := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		names[i] = fmt.Sprintf("scale-%05d", i)
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
		testutil.Eventually(b, max(10*time.Minute, time.Duration(n)*time.Second), "all plugins converged", func() (bool, string) {
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

		revoke := revokeUnderLoad(b, cl, names)
		run.stop()

		b.ReportMetric(converge.Seconds(), "converge-s")
		b.ReportMetric(float64(writes)/float64(n), "writes/reconcile")
		b.ReportMetric(revoke.Seconds(), "revoke-s")
		b.ReportMetric(peakRSSMiB(), "peak-RSS-MiB")
	}
}

// revokeUnderLoad touches every Plugin named in names (queueing a routine
// reconcile for each), deletes the last one's grant and returns how long its
// Deployment took to go.
func revokeUnderLoad(b *testing.B, cl client.Client, names []string) time.Duration {
	b.Helper()
	ctx := context.Background()
	touched := strconv.FormatInt(time.Now().UnixNano(), 10)
	for _, name := range names {
		label(b, cl, testutil.MakePlugin(name, "").Obj(), "touched", touched)
	}
	revoked := names[len(names)-1]
	start := time.Now()
	if err := cl.Delete(ctx, testutil.MakeGrant(revoked).Obj()); err != nil {
		b.Fatal(err)
	}
	var dep appsv1.Deployment
	key := client.ObjectKey{Namespace: plugins.Namespace, Name: plugins.ServiceAccountName(revoked)}
	for {
		err := cl.Get(ctx, key, &dep)
		if apierrors.IsNotFound(err) {
			return time.Since(start)
		}
		if err != nil {
			b.Fatal(err)
		}
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("the Deployment of %s still exists 5 minutes after its grant was deleted", revoked)
		}
		time.Sleep(5 * time.Millisecond)
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
