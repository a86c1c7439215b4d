package core

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/plugins"
	openfief "github.com/arkadiuss/openfief/sdk/go"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// Environment of BenchmarkCoreScale (make bench-core).
const (
	// scaleInstancesEnv is how many connector instances the core calls
	// (10,000).
	scaleInstancesEnv = "OPENFIEF_BENCH_INSTANCES"
	// scaleIntervalEnv is their sync interval (60s), scaleWindowEnv how
	// long the core is watched (3m).
	scaleIntervalEnv = "OPENFIEF_BENCH_INTERVAL"
	scaleWindowEnv   = "OPENFIEF_BENCH_WINDOW"
	// scaleProfilesEnv, when set, is a directory for the core's CPU
	// profile of the window and its heap profile at the window's end.
	scaleProfilesEnv = "OPENFIEF_BENCH_PROFILES"
)

// Targets of the core at scale: its resident memory and how late a sync
// may start at the 99th percentile.
const (
	scaleMaxRSS  = 256 << 20
	scaleMaxLate = time.Second
)

// BenchmarkCoreScale runs the core's scheduler and caller as Start wires
// them over n connector instances (10,000) on the real SQLite store, each
// synced every interval (60 s; the first syncs spread over one interval, as
// a restarted core's recorded schedule spreads them) for a window of three
// minutes. One stand-in process (scale_standin_test.go) answers them all
// over HTTP: it signs each instance's TokenRequest token, which the core
// asks for through client-go as it asks the API server, and checks it
// with the SDK's RequireCore and JWKSVerifier for that instance alone. It
// reports:
//   - RSS-MiB, peak-RSS-MiB: this process's resident memory (VmRSS at
//     the window's end, VmHWM), which holds the core alone; idle-RSS-MiB
//     before the scheduler started, and heap-inuse-MiB, goroutines at the
//     end;
//   - late-p50-ms, late-p99-ms, late-max-ms: how long after its due time
//     each sync reached the stand-in, over every sync of the window, and
//     late-p99-later-ms over the syncs after each instance's first (its
//     token minted by then);
//   - syncs, syncs-due, syncs-lost, syncs-failed: syncs stored in the
//     window, those due in it (stored, plus those more than a second
//     overdue at its end: lost), and those that failed; rounds-missed
//     counts the syncs that reached the stand-in more than the interval,
//     its jitter and ten seconds after the instance's one before (a
//     worker stopped and started again, its round skipped), longest-gap-s
//     the longest wait between two syncs of an instance;
//   - store-calls/s, rows/s: the scheduler's calls of the store and the
//     rows it imported, per second of the window; tokens the tokens
//     minted;
//   - cpu-µs/sync, floor-cpu-µs/sync and core/floor: this process's CPU
//     time per sync, and a bare loop's making the same calls one after
//     another (a token request per instance, the Sync over a plain Connect
//     client, the watermark read, the import and the sync's record) in
//     the same process once the window ended.
//
// It fails when a token was refused, an instance was called twice at once,
// a sync failed or was lost, or a target (RSS < 256 MiB, p99 within 1 s) is
// missed. Figures only: nothing here is a timed test. The core runs under
// the soft memory limit deploy/core gives it (scale_memlimit_test.go). Run
// each benchmark in a process of its own (make bench-core-scale does): the
// peak RSS is the process's.
//
//	go test ./internal/core -run '^$' -bench 'CoreScale$' -benchtime 1x -timeout 30m
func BenchmarkCoreScale(b *testing.B) {
	st, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "core.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	for b.Loop() {
		runCoreScale(b, st, nil)
	}
}

// scaleConfig is a run's size, from the environment.
type scaleConfig struct {
	n                int
	interval, window time.Duration
}

func readScaleConfig(b *testing.B) scaleConfig {
	c := scaleConfig{n: 10_000, interval: time.Minute, window: 3 * time.Minute}
	if s := os.Getenv(scaleInstancesEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: a positive number of instances", scaleInstancesEnv, s)
		}
		c.n = n
	}
	for env, dst := range map[string]*time.Duration{scaleIntervalEnv: &c.interval, scaleWindowEnv: &c.window} {
		if s := os.Getenv(env); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d < MinSyncInterval {
				b.Fatalf("%s=%q: a duration of at least %v", env, s, MinSyncInterval)
			}
			*dst = d
		}
	}
	return c
}

// scaleLeases, when set, makes the leases of the run's one replica
// (PostgreSQL), which hand the scheduler its instances through apply.
type scaleLeases func(st *store.Store, apply func([]Target)) *Leases

func runCoreScale(b *testing.B, st *store.Store, leases scaleLeases) {
	c := readScaleConfig(b)
	if limit := withDeployedMemoryLimit(b); limit != "" {
		b.Logf("the core under GOMEMLIMIT=%s, as deploy/core runs it", limit)
	}
	addr, _, stopStandIn := startStandIn(b)
	names := make([]string, c.n)
	targets := make([]Target, c.n)
	for i := range names {
		names[i] = fmt.Sprintf("c-%05d", i)
		targets[i] = Target{Instance: names[i], UID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), Connector: true}
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	cs, err := kubernetes.NewForConfig(coreClientConfig(&rest.Config{Host: "http://" + addr}, 0, 0))
	if err != nil {
		b.Fatal(err)
	}
	tokens := NewTokens(cs.CoreV1(), plugins.Namespace, DefaultServiceAccount, nil)
	metrics := NewMetrics(log)
	ss := &scaleStore{Store: st, firstSeen: map[string]bool{}, took: map[string][]time.Duration{},
		// The interval, its largest jitter (DefaultJitter) and ten seconds
		// for the sync before (its call, import and record) and this one's
		// lateness: more means a round skipped, as when leases stopped the
		// workers and they started afresh.
		lastArrival: map[string]time.Time{}, gapLimit: c.interval + time.Duration(DefaultJitter*float64(c.interval)) + 10*time.Second}
	caller := &Caller{Tokens: timedTokens{tokens, ss}, Metrics: metrics, Resolve: func(instance string) string {
		return "http://" + addr + standInPrefix + instance
	}}
	runtime.GC()
	idle := readProcStatus(b)

	ctx, cancel := context.WithCancel(context.Background())
	var sched *Scheduler
	so := SchedulerOptions{
		Store: ss, Connector: timedConnector{caller, ss}, DefaultInterval: c.interval, FirstSyncDelay: c.interval,
		Log: log, Metrics: metrics, OnStop: tokens.Forget,
	}
	var lz *Leases
	if leases != nil {
		lz = leases(st, func(owned []Target) { sched.Update(owned) })
		so.WorkerContext = lz.WorkerContext
	}
	sched = NewScheduler(ctx, so)
	ss.sched.Store(sched)
	update, wait := sched.Update, sched.Wait
	if lz != nil {
		leased := make(chan struct{})
		go func() {
			defer close(leased)
			lz.Run(ctx)
		}()
		update = lz.Update
		wait = func() {
			<-leased
			sched.Wait()
		}
	}
	profiles := os.Getenv(scaleProfilesEnv)
	if profiles != "" {
		f, err := os.Create(filepath.Join(profiles, "core-scale-cpu.pprof"))
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = f.Close() }()
	}
	cpu0 := cpuTime()
	start := time.Now()
	update(targets)
	var rssMax uint64
	var curve []string
	for time.Since(start) < c.window {
		time.Sleep(time.Second)
		rss := readProcStatus(b).rss
		rssMax = max(rssMax, rss)
		if sec := int(time.Since(start).Seconds()); sec%15 == 0 {
			curve = append(curve, fmt.Sprintf("%ds %s", sec, runtimeMemory(rss)))
		}
	}
	end := time.Now()
	cpu := cpuTime() - cpu0
	if profiles != "" {
		pprof.StopCPUProfile()
		runtime.GC()
		f, err := os.Create(filepath.Join(profiles, "core-scale-heap.pprof"))
		if err != nil {
			b.Fatal(err)
		}
		_ = pprof.WriteHeapProfile(f)
		_ = f.Close()
	}
	mem := readProcStatus(b)
	var heap runtime.MemStats
	runtime.ReadMemStats(&heap)
	goroutines := runtime.NumGoroutine()
	got := ss.snapshot()
	lost := 0
	for _, n := range names {
		if next, ok := sched.NextSync(n); !ok || next.Before(end.Add(-scaleMaxLate)) {
			lost++
		}
	}
	counts := standInCountsNow(b, addr)
	cancel()
	wait()
	floor := scaleFloor(b, st, addr, names, max(1, int(got.stored/max(counts.Minted, 1))))
	stopStandIn()

	const mib = 1 << 20
	secs := end.Sub(start).Seconds()
	all, later := got.late, got.lateLater
	b.ReportMetric(float64(c.n), "instances")
	b.ReportMetric(float64(mem.rss)/mib, "RSS-MiB")
	b.ReportMetric(float64(max(mem.hwm, rssMax))/mib, "peak-RSS-MiB")
	b.ReportMetric(float64(idle.rss)/mib, "idle-RSS-MiB")
	b.ReportMetric(float64(heap.HeapInuse)/mib, "heap-inuse-MiB")
	b.ReportMetric(float64(goroutines), "goroutines")
	b.ReportMetric(ms(percentile(all, 0.50)), "late-p50-ms")
	b.ReportMetric(ms(percentile(all, 0.99)), "late-p99-ms")
	b.ReportMetric(ms(percentile(all, 1)), "late-max-ms")
	b.ReportMetric(ms(percentile(later, 0.99)), "late-p99-later-ms")
	b.ReportMetric(float64(got.stored), "syncs")
	b.ReportMetric(float64(got.stored+int64(lost)), "syncs-due")
	b.ReportMetric(float64(lost), "syncs-lost")
	b.ReportMetric(float64(got.failed), "syncs-failed")
	b.ReportMetric(float64(got.gaps), "rounds-missed")
	b.ReportMetric(got.longest.Seconds(), "longest-gap-s")
	b.ReportMetric(float64(got.calls)/secs, "store-calls/s")
	b.ReportMetric(float64(got.rows)/secs, "rows/s")
	b.ReportMetric(float64(counts.Minted), "tokens")
	perSync := float64(cpu.Microseconds()) / float64(max(got.stored, 1))
	b.ReportMetric(perSync, "cpu-µs/sync")
	b.ReportMetric(floor, "floor-cpu-µs/sync")
	b.ReportMetric(perSync/floor, "core/floor")
	b.Logf("%d instances every %v for %v: %d syncs stored (%d by the stand-in's count, %d instances called), %d due, %d lost, %d failed; %d tokens minted, %d refused",
		c.n, c.interval, c.window, got.stored, counts.Calls, counts.Instances, got.stored+int64(lost), lost, got.failed, counts.Minted, counts.Refused)

	b.Logf("peak RSS %.0f MiB (%.0f at the end, %.0f idle); late p50 %v, p99 %v (after each instance's first sync %v), max %v; %.0f store calls/s, %.0f rows/s; CPU %.0f µs/sync, floor %.0f µs/sync, core/floor %.2f",
		float64(max(mem.hwm, rssMax))/mib, float64(mem.rss)/mib, float64(idle.rss)/mib,
		percentile(all, 0.5).Round(time.Millisecond), percentile(all, 0.99).Round(time.Millisecond), percentile(later, 0.99).Round(time.Millisecond), percentile(all, 1).Round(time.Millisecond),
		float64(got.calls)/secs, float64(got.rows)/secs, perSync, floor, perSync/floor)
	b.Logf("store calls, tokens and calls: %s", ss.tookSummary())
	b.Logf("memory over the window (go test shows ten lines of a benchmark's log): %s", strings.Join(curve, " | "))
	b.Logf("memory at the end: heap in use %.1f MiB, heap idle not released %.1f MiB, stacks %.1f MiB, other runtime %.1f MiB; GC cycles %d",
		float64(heap.HeapInuse)/mib, float64(heap.HeapIdle-heap.HeapReleased)/mib, float64(heap.StackInuse)/mib,
		float64(heap.MSpanInuse+heap.MCacheInuse+heap.GCSys+heap.OtherSys+heap.BuckHashSys)/mib, heap.NumGC)
	if counts.Refused > 0 {
		b.Errorf("the stand-in refused %d tokens", counts.Refused)
	}
	if counts.Twice > 0 {
		b.Errorf("%d instances were called twice at once", counts.Twice)
	}
	if got.failed > 0 || lost > 0 || got.gaps > 0 {
		b.Errorf("%d syncs failed, %d were lost at the end, %d came more than %v after the one before (longest %v)",
			got.failed, lost, got.gaps, ss.gapLimit, got.longest.Round(time.Millisecond))
	}
	if peak := max(mem.hwm, rssMax); peak >= scaleMaxRSS {
		b.Errorf("peak RSS %.0f MiB, the target is under %d MiB", float64(peak)/mib, scaleMaxRSS/mib)
	}
	if p99 := percentile(all, 0.99); p99 > scaleMaxLate {
		b.Errorf("syncs started %v after their due time at p99, the target is %v", p99, scaleMaxLate)
	}
}

// ms is a duration in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile returns the p-quantile of ds (sorted here), zero when empty.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(p*float64(len(ds))))]
}

// scaleStore is the store as the scheduler uses it, counting its calls and
// imported rows, and how late each stored sync reached the stand-in: the
// watermark the stand-in answers is when the call arrived, and the
// scheduler's NextSync still holds the sync's due time while it imports.
type scaleStore struct {
	*store.Store
	sched atomic.Pointer[Scheduler]

	calls, rows, stored, failed atomic.Int64

	mu        sync.Mutex
	took      map[string][]time.Duration
	late      []time.Duration
	lateLater []time.Duration
	firstSeen map[string]bool
	// lastArrival is when each instance's last stored sync reached the
	// stand-in; gaps counts the syncs that came more than gapLimit after
	// the one before (a round missed), longest the longest gap.
	lastArrival map[string]time.Time
	gapLimit    time.Duration
	gaps        int
	longest     time.Duration
}

type scaleCounts struct {
	calls, rows, stored, failed int64
	late, lateLater             []time.Duration
	gaps                        int
	longest                     time.Duration
}

func (s *scaleStore) snapshot() scaleCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return scaleCounts{calls: s.calls.Load(), rows: s.rows.Load(), stored: s.stored.Load(), failed: s.failed.Load(),
		late: slices.Clone(s.late), lateLater: slices.Clone(s.lateLater), gaps: s.gaps, longest: s.longest}
}

// timed records how long one call of method took.
func (s *scaleStore) timed(method string, start time.Time) {
	d := time.Since(start)
	s.mu.Lock()
	s.took[method] = append(s.took[method], d)
	s.mu.Unlock()
}

// tookSummary returns p50, p99 and the longest of each method's calls.
func (s *scaleStore) tookSummary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []string
	for m, ds := range s.took {
		ds = slices.Clone(ds)
		parts = append(parts, fmt.Sprintf("%s n=%d p50=%v p99=%v max=%v", m, len(ds),
			percentile(ds, 0.5).Round(time.Microsecond), percentile(ds, 0.99).Round(time.Microsecond), percentile(ds, 1).Round(time.Microsecond)))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

func (s *scaleStore) Import(ctx context.Context, instance string, kind store.Kind, d *connectorv1.Delivery) (store.ImportResult, error) {
	s.calls.Add(1)
	defer s.timed("Import", time.Now())
	due, _ := s.sched.Load().NextSync(instance)
	res, err := s.Store.Import(ctx, instance, kind, d)
	if err != nil {
		return res, err
	}
	s.rows.Add(int64(res.Rows()))
	s.stored.Add(1)
	if ns, perr := strconv.ParseInt(d.GetWatermark(), 10, 64); perr == nil && !due.IsZero() {
		arrived := time.Unix(0, ns)
		late := arrived.Sub(due)
		s.mu.Lock()
		if last, ok := s.lastArrival[instance]; ok {
			gap := arrived.Sub(last)
			s.longest = max(s.longest, gap)
			if gap > s.gapLimit {
				s.gaps++
			}
		}
		s.lastArrival[instance] = arrived
		s.late = append(s.late, late)
		if s.firstSeen[instance] {
			s.lateLater = append(s.lateLater, late)
		}
		s.firstSeen[instance] = true
		s.mu.Unlock()
	}
	return res, nil
}

func (s *scaleStore) Watermark(ctx context.Context, instance string) (string, error) {
	s.calls.Add(1)
	defer s.timed("Watermark", time.Now())
	return s.Store.Watermark(ctx, instance)
}

func (s *scaleStore) RecordSync(ctx context.Context, instance string, r store.SyncRecord) error {
	s.calls.Add(1)
	defer s.timed("RecordSync", time.Now())
	if !r.OK {
		s.failed.Add(1)
	}
	return s.Store.RecordSync(ctx, instance, r)
}

func (s *scaleStore) Status(ctx context.Context, instance string) (store.InstanceRecord, error) {
	s.calls.Add(1)
	defer s.timed("Status", time.Now())
	return s.Store.Status(ctx, instance)
}

func (s *scaleStore) Claim(ctx context.Context, name, uid string, at time.Time) (string, error) {
	s.calls.Add(1)
	defer s.timed("Claim", time.Now())
	return s.Store.Claim(ctx, name, uid, at)
}

// scaleFloor makes the calls of syncs one after another with nothing of the
// core between them, and returns this process's CPU time per sync in µs:
// for each of up to 2,000 instances a token request (a plain POST), then
// perToken syncs of it, each the watermark read, the Sync over a plain
// Connect client with that token, the import and the sync's record.
func scaleFloor(b *testing.B, st *store.Store, addr string, names []string, perToken int) float64 {
	ctx := context.Background()
	hc := &http.Client{}
	k := min(len(names), max(1, 2000/perToken))
	var syncs int
	cpu0 := cpuTime()
	for _, name := range names[:k] {
		token := floorToken(b, hc, addr, name)
		cl := connectorv1connect.NewConnectorServiceClient(hc, "http://"+addr+standInPrefix+name)
		for range perToken {
			wm, err := st.Watermark(ctx, name)
			if err != nil {
				b.Fatal(err)
			}
			req := connect.NewRequest(&connectorv1.SyncRequest{BatchId: newBatchID(), Watermark: wm})
			req.Header().Set("Authorization", "Bearer "+token)
			resp, err := cl.Sync(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := st.Import(ctx, name, store.KindSync, resp.Msg.GetDelivery()); err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			if err := st.RecordSync(ctx, name, store.SyncRecord{At: now, OK: true, Next: now.Add(time.Hour)}); err != nil {
				b.Fatal(err)
			}
			syncs++
		}
	}
	return float64((cpuTime() - cpu0).Microseconds()) / float64(syncs)
}

// floorToken asks the stand-in for a token of instance with a plain POST,
// as the TokenRequest client-go sends.
func floorToken(b *testing.B, hc *http.Client, addr, instance string) string {
	secs := int64(tokenLifetime / time.Second)
	body, err := json.Marshal(&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{openfief.InstanceAudience(instance)}, ExpirationSeconds: &secs,
	}})
	if err != nil {
		b.Fatal(err)
	}
	url := "http://" + addr + "/api/v1/namespaces/" + plugins.Namespace + "/serviceaccounts/" + DefaultServiceAccount + "/token"
	resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var tr authenticationv1.TokenRequest
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&tr); err != nil || tr.Status.Token == "" {
		b.Fatalf("token for %s: %v", instance, err)
	}
	return tr.Status.Token
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procMemory is this process's resident memory now and at its peak.
type procMemory struct{ rss, hwm uint64 }

// readProcStatus reads VmRSS and VmHWM from /proc/self/status.
func readProcStatus(b *testing.B) procMemory {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	var m procMemory
	for line := range strings.SplitSeq(string(raw), "\n") {
		for key, dst := range map[string]*uint64{"VmRSS:": &m.rss, "VmHWM:": &m.hwm} {
			if rest, ok := strings.CutPrefix(line, key); ok {
				kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				if err != nil {
					b.Fatalf("%s %q: %v", key, rest, err)
				}
				*dst = kb << 10
			}
		}
	}
	return m
}

// runtimeMemory describes the resident memory rss and the runtime's share
// of it now, read without stopping the world.
func runtimeMemory(rss uint64) string {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/stacks:bytes"},
		{Name: "/sched/goroutines:goroutines"},
	}
	metrics.Read(samples)
	const mib = 1 << 20
	return fmt.Sprintf("RSS %.0f MiB: heap objects %.0f, unused %.0f, free not released %.0f, stacks %.0f MiB; %d goroutines",
		float64(rss)/mib, float64(samples[0].Value.Uint64())/mib, float64(samples[1].Value.Uint64())/mib,
		float64(samples[2].Value.Uint64())/mib, float64(samples[3].Value.Uint64())/mib, samples[4].Value.Uint64())
}

// timedTokens and timedConnector time the core's token lookups and calls
// beside the store's calls.
type timedTokens struct {
	TokenSource
	ss *scaleStore
}

func (t timedTokens) Token(ctx context.Context, instance string) (string, error) {
	defer t.ss.timed("Token", time.Now())
	return t.TokenSource.Token(ctx, instance)
}

type timedConnector struct {
	Connector
	ss *scaleStore
}

func (c timedConnector) Warm(ctx context.Context, instance string) {
	if w, ok := c.Connector.(warmer); ok {
		w.Warm(ctx, instance)
	}
}

func (c timedConnector) Sync(ctx context.Context, instance string, req *connectorv1.SyncRequest) (*connectorv1.Delivery, error) {
	defer c.ss.timed("Sync", time.Now())
	return c.Connector.Sync(ctx, instance, req)
}
