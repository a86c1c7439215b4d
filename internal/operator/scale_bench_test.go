//go:build cluster

package operator

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// Environment of BenchmarkOperatorScale (make bench-operator, make
// bench-scale).
const (
	// benchPluginsEnv is how many Plugins the benchmark installs (500).
	benchPluginsEnv = "OPENFIEF_BENCH_PLUGINS"
	// benchQPSEnv and benchBurstEnv set the operator's client rate limit
	// (DefaultKubeAPIQPS, DefaultKubeAPIBurst).
	benchQPSEnv   = "OPENFIEF_BENCH_QPS"
	benchBurstEnv = "OPENFIEF_BENCH_BURST"
	// benchWorkersEnv (scale_child_test.go) sets the operator's
	// MaxConcurrentReconciles and the floor's workers.
	// benchFloorEnv, when set, writes the floor for that many Plugins only
	// and scales its time to n (at 10,000 the full floor doubles the run).
	benchFloorEnv = "OPENFIEF_BENCH_FLOOR_PLUGINS"
	// benchProfilesEnv, when set, is a directory for the operator's CPU
	// profile of its first 30 s and its heap profile once converged.
	benchProfilesEnv = "OPENFIEF_BENCH_PROFILES"
)

// BenchmarkOperatorScale installs n Plugins with grants on the real API
// server (the package's minimal control plane, on this machine), starts the
// operator cold as a child process with the client rate limit of
// cmd/operator's defaults, and reports the figures below. The child is
// operatortest/scaleoperator, a command that runs what cmd/operator runs,
// built once a run with the release's flags (buildChildOperator,
// scale_child_test.go): its memory is that of the operator binary as
// shipped, not the test binary's. It reports:
//   - converge-s: seconds until every Plugin's status describes its
//     generation with its workload applied;
//   - writes/plugin: the operator's writes (POST, PUT, PATCH, DELETE, Events
//     included) until then, divided by n;
//   - writes/reconcile: writes after a label touched every Plugin and grant
//     (each touch reconciles), divided by the reconciles; the target is 0
//     (OF-4);
//   - revoke-steady-ms: from a grant's deletion to its Deployment's, with
//     the other Plugins steady;
//   - revoke-load-ms and backlog: the same while a label touch of every
//     Plugin queues routine reconciles, and how many were still queued when
//     the Deployment was gone (revocations go first, OF-15);
//   - RSS-MiB, peak-RSS-MiB: the operator process's resident memory once
//     steady and at its peak (VmRSS, VmHWM), file-RSS-MiB the file pages
//     in it once steady (RssFile, mostly the operator binary's), and
//     heap-inuse-MiB its Go heap in use once steady; the child runs with
//     deploy/operator's GOMEMLIMIT unless OPENFIEF_BENCH_GOMEMLIMIT says
//     otherwise;
//   - floor-s, floor-writes/plugin: a plain client at the same rate limit
//     and concurrency writing the same objects (floorWrite; for a sample of
//     the Plugins when OPENFIEF_BENCH_FLOOR_PLUGINS says so, its time scaled
//     to n), and the ratios converge/floor and writes/floor-writes.
//
// The image checker is a stub, so registry reads are not in the figures.
// Figures only: nothing here is timed as a test.
func BenchmarkOperatorScale(b *testing.B) {
	n := envInt(b, benchPluginsEnv, 500)
	qps := float64(envInt(b, benchQPSEnv, DefaultKubeAPIQPS))
	burst := envInt(b, benchBurstEnv, DefaultKubeAPIBurst)
	workers := envInt(b, benchWorkersEnv, DefaultMaxConcurrentReconciles)
	c, cl := testCluster(b)
	ctx := context.Background()
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("scale-%05d", i)
	}
	forEach(b, names, 16, func(name string) error {
		p := testutil.MakePlugin(name, testutil.Image(name)).Egress("api.nbp.pl").Obj()
		if err := cl.Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		if err := cl.Create(ctx, testutil.GrantFor(p).Obj()); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	})
	if b.Failed() {
		return
	}
	b.Logf("%d Plugins with grants installed; operator client at %.0f QPS, burst %d, %d workers", n, qps, burst, workers)

	// The Plugins are watched, not listed: listing 10,000 of them every few
	// seconds would load the API server the operator writes to.
	watched := watchPlugins(b, c)
	exe := buildChildOperator(b)
	for b.Loop() {
		start := time.Now()
		op := startChildOperator(b, exe, c, qps, burst)
		profiles := os.Getenv(benchProfilesEnv)
		var profiled sync.WaitGroup
		if profiles != "" {
			profiled.Go(func() { op.saveProfile(b, "profile", "seconds=30", profiles, "operator-cpu.pprof") })
		}
		testutil.Eventually(b, 30*time.Minute, "all plugins converged", func() (bool, string) {
			time.Sleep(500 * time.Millisecond)
			done, err := converged(ctx, watched)
			if err != nil {
				return false, err.Error()
			}
			return done == n, fmt.Sprintf("%d of %d", done, n)
		})
		converge := time.Since(start)
		atConverge := mustScrape(b, op)
		b.Logf("converged in %.1f s with %.0f writes (%.2f per plugin)", converge.Seconds(), atConverge.writes, atConverge.writes/float64(n))
		settle(b, op)
		if profiles != "" {
			op.saveProfile(b, "heap", "gc=1", profiles, "operator-heap.pprof")
		}

		before := mustScrape(b, op)
		touch(b, cl, names, &v1alpha1.Plugin{}, nil)
		touch(b, cl, names, &v1alpha1.PluginGrant{}, nil)
		after := settle(b, op)
		steadyWrites := (after.writes - before.writes) / (after.reconciles - before.reconciles)

		revokeSteady := revoke(b, cl, names[0])

		touching := make(chan struct{})
		var touched sync.WaitGroup
		touched.Go(func() { touch(b, cl, names[2:], &v1alpha1.Plugin{}, touching) })
		<-touching // half the Plugins are touched
		revokeLoad := revoke(b, cl, names[1])
		backlog := mustScrape(b, op).depth
		touched.Wait()
		steady := settle(b, op)
		rss, peak, file := op.memory()
		profiled.Wait()
		op.stop()

		sample := names[2:]
		if k := envInt(b, benchFloorEnv, len(sample)); k < len(sample) {
			sample = sample[:k]
		}
		floor := floorWrite(b, c, cl, sample, qps, burst, workers)
		floorPerPlugin := float64(floor.writes) / float64(len(sample))
		floorAll := floor.elapsed.Seconds() * float64(n) / float64(len(sample))

		b.ReportMetric(converge.Seconds(), "converge-s")
		b.ReportMetric(atConverge.writes/float64(n), "writes/plugin")
		b.ReportMetric(steadyWrites, "writes/reconcile")
		b.ReportMetric(float64(revokeSteady.Milliseconds()), "revoke-steady-ms")
		b.ReportMetric(float64(revokeLoad.Milliseconds()), "revoke-load-ms")
		b.ReportMetric(backlog, "backlog")
		b.ReportMetric(rss, "RSS-MiB")
		b.ReportMetric(peak, "peak-RSS-MiB")
		b.ReportMetric(file, "file-RSS-MiB")
		b.ReportMetric(steady.heap/(1<<20), "heap-inuse-MiB")
		b.ReportMetric(floorAll, "floor-s")
		b.ReportMetric(floorPerPlugin, "floor-writes/plugin")
		b.ReportMetric(converge.Seconds()/floorAll, "converge/floor")
		b.ReportMetric(atConverge.writes/float64(n)/floorPerPlugin, "writes/floor-writes")
	}
}

// converged counts the scale Plugins whose status describes their generation
// with a deployed version.
func converged(ctx context.Context, cl client.Reader) (int, error) {
	var list v1alpha1.PluginList
	if err := cl.List(ctx, &list, client.InNamespace(plugins.Namespace)); err != nil {
		return 0, err
	}
	done := 0
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, "scale-") && p.Status.ObservedGeneration == p.Generation && p.Status.Deployed != nil {
			done++
		}
	}
	return done, nil
}

// watchPlugins returns a reader of the Plugins of c's openfief namespace
// from a watch, running until the benchmark ends.
func watchPlugins(b *testing.B, c *devcluster.Cluster) client.Reader {
	b.Helper()
	s, err := apiconv.NewScheme()
	if err != nil {
		b.Fatal(err)
	}
	ca, err := cache.New(c.Config, cache.Options{Scheme: s, DefaultNamespaces: map[string]cache.Config{plugins.Namespace: {}}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	if _, err := ca.GetInformer(ctx, &v1alpha1.Plugin{}); err != nil {
		b.Fatal(err)
	}
	go func() {
		if err := ca.Start(ctx); err != nil {
			b.Errorf("plugin watch: %v", err)
		}
	}()
	if !ca.WaitForCacheSync(ctx) {
		b.Fatal("plugin watch did not sync")
	}
	return ca
}

// settle waits until the operator's queue is empty and it has sent no write
// for three seconds, and returns its figures then.
func settle(b *testing.B, op *childOperator) childFigures {
	b.Helper()
	last := mustScrape(b, op)
	quiet := 0
	for quiet < 3 {
		time.Sleep(time.Second)
		f := mustScrape(b, op)
		if f.depth == 0 && f.writes == last.writes && f.reconciles == last.reconciles {
			quiet++
		} else {
			quiet = 0
		}
		last = f
	}
	return last
}

// touch sets a fresh label on the named objects of obj's kind with one
// merge patch each, which reconciles each without changing what the operator
// computes. half, when not nil, is closed once half are touched.
func touch(b *testing.B, cl client.Client, names []string, obj client.Object, half chan struct{}) {
	b.Helper()
	value := strconv.FormatInt(time.Now().UnixNano(), 10)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"`+value+`"}}}`))
	var (
		mu    sync.Mutex
		count int
	)
	forEach(b, names, 16, func(name string) error {
		o := obj.DeepCopyObject().(client.Object)
		o.SetNamespace(plugins.Namespace)
		o.SetName(name)
		err := cl.Patch(context.Background(), o, patch)
		mu.Lock()
		count++
		if half != nil && count == len(names)/2 {
			close(half)
		}
		mu.Unlock()
		return err
	})
}

// revoke deletes the grant of plugin name and returns how long until its
// Deployment is gone, read from the API server every 10 ms.
func revoke(b *testing.B, cl client.Client, name string) time.Duration {
	b.Helper()
	ctx := context.Background()
	key := types.NamespacedName{Namespace: plugins.Namespace, Name: plugins.ServiceAccountName(name)}
	if err := cl.Get(ctx, key, &appsv1.Deployment{}); err != nil {
		b.Fatalf("before revoking %s: %v", name, err)
	}
	start := time.Now()
	if err := cl.Delete(ctx, testutil.MakeGrant(name).Obj()); err != nil {
		b.Fatal(err)
	}
	for {
		err := cl.Get(ctx, key, &appsv1.Deployment{})
		if apierrors.IsNotFound(err) {
			return time.Since(start)
		}
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("Deployment of %s still there 5 minutes after its grant's deletion (%v)", name, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// forEach runs f on every name with at most workers at once; errors fail b.
func forEach(b *testing.B, names []string, workers int, f func(string) error) {
	b.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, workers)
	for _, name := range names {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(name); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
}

func mustScrape(b *testing.B, op *childOperator) childFigures {
	b.Helper()
	f, err := op.scrape()
	if err != nil {
		b.Fatalf("operator metrics: %v; log %s", err, op.log)
	}
	return f
}

// envInt reads a positive integer from the environment, def when unset.
func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}
