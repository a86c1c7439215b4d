//go:build heavy

package core

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/core/store/pgtest"
	"github.com/arkadiuss/openfief/internal/core/store/storetest"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// Several replicas of the core's scheduler, each with its own leases, on one
// real PostgreSQL database, calling one stand-in connector that counts the
// calls in flight per instance. What a replica is here: the Leases and the
// Scheduler as Start wires them (Apply to Update, WorkerContext), without
// the API server the rest of the core needs.

const (
	replicaInterval = time.Second
	replicaTTL      = 1500 * time.Millisecond
	replicaRenew    = 300 * time.Millisecond
	replicaCall     = 200 * time.Millisecond
)

// takeoverBound is how long an instance may wait for another replica after
// its replica died: the lease's expiry, a renewal period to notice, and
// slack for a loaded machine.
const takeoverBound = replicaTTL + replicaRenew + time.Second

// replicaStore is one replica's view of the shared store: its lease
// statements can be cut (they hang: the database unreachable for them) or
// fail (the replica dead), and it records when its writes committed and
// when a lease statement last succeeded.
type replicaStore struct {
	*store.Store
	cut, dead atomic.Bool

	mu sync.Mutex
	// leased is when a renewal or a claim last returned: no lease of this
	// replica expires later than leased plus the TTL.
	leased time.Time
	stored []time.Time
}

func (r *replicaStore) blocked(ctx context.Context) error {
	if r.dead.Load() {
		return errors.New("the replica is dead")
	}
	if r.cut.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (r *replicaStore) noteLease() {
	r.mu.Lock()
	r.leased = time.Now()
	r.mu.Unlock()
}

func (r *replicaStore) AcquireLease(ctx context.Context, instance, owner, address string, ttl time.Duration) (int64, bool, error) {
	if err := r.blocked(ctx); err != nil {
		return 0, false, err
	}
	e, ok, err := r.Store.AcquireLease(ctx, instance, owner, address, ttl)
	if ok {
		r.noteLease()
	}
	return e, ok, err
}

func (r *replicaStore) RenewLeases(ctx context.Context, owner string, ttl time.Duration) ([]store.Lease, error) {
	if err := r.blocked(ctx); err != nil {
		return nil, err
	}
	got, err := r.Store.RenewLeases(ctx, owner, ttl)
	if err == nil && len(got) > 0 {
		r.noteLease()
	}
	return got, err
}

func (r *replicaStore) ReleaseLease(ctx context.Context, instance, owner string, epoch int64) error {
	if err := r.blocked(ctx); err != nil {
		return err
	}
	return r.Store.ReleaseLease(ctx, instance, owner, epoch)
}

func (r *replicaStore) HeldLeases(ctx context.Context) ([]store.Lease, error) {
	if err := r.blocked(ctx); err != nil {
		return nil, err
	}
	return r.Store.HeldLeases(ctx)
}

func (r *replicaStore) Heartbeat(ctx context.Context, owner string, ttl time.Duration) error {
	if err := r.blocked(ctx); err != nil {
		return err
	}
	return r.Store.Heartbeat(ctx, owner, ttl)
}

func (r *replicaStore) LiveReplicas(ctx context.Context) (int, error) {
	if err := r.blocked(ctx); err != nil {
		return 0, err
	}
	return r.Store.LiveReplicas(ctx)
}

func (r *replicaStore) Depart(ctx context.Context, owner string) error {
	if err := r.blocked(ctx); err != nil {
		return err
	}
	return r.Store.Depart(ctx, owner)
}

func (r *replicaStore) Import(ctx context.Context, instance string, kind store.Kind, d *connectorv1.Delivery) (store.ImportResult, error) {
	res, err := r.Store.Import(ctx, instance, kind, d)
	if err == nil {
		r.mu.Lock()
		r.stored = append(r.stored, time.Now())
		r.mu.Unlock()
	}
	return res, err
}

func (r *replicaStore) lastStored() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.stored) == 0 {
		return time.Time{}
	}
	return r.stored[len(r.stored)-1]
}

func (r *replicaStore) leasedAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leased
}

// standIn is the connector every replica calls: each call takes
// replicaCall (or ends with its context), and answers one FX rate and the
// next watermark.
type standIn struct {
	mu       sync.Mutex
	inflight map[string]int
	most     map[string]int
	calls    []standInCall
	// started is told of every call as it starts.
	started chan standInCall
}

type standInCall struct {
	instance, replica string
	fence             store.Fence
	start, end        time.Time
	ok                bool
}

func newStandIn() *standIn {
	return &standIn{inflight: map[string]int{}, most: map[string]int{}, started: make(chan standInCall, 1024)}
}

// conn is the connector as replica calls it.
type standInConn struct {
	s       *standIn
	replica string
}

func (c standInConn) Sync(ctx context.Context, instance string, req *connectorv1.SyncRequest) (*connectorv1.Delivery, error) {
	s := c.s
	f, _ := store.FenceOf(ctx)
	call := standInCall{instance: instance, replica: c.replica, fence: f, start: time.Now()}
	s.mu.Lock()
	s.inflight[instance]++
	s.most[instance] = max(s.most[instance], s.inflight[instance])
	s.mu.Unlock()
	s.started <- call
	var err error
	select {
	case <-time.After(replicaCall):
	case <-ctx.Done():
		err = ctx.Err()
	}
	call.end, call.ok = time.Now(), err == nil
	s.mu.Lock()
	s.inflight[instance]--
	s.calls = append(s.calls, call)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	k, _ := strconv.Atoi(req.GetWatermark())
	return &connectorv1.Delivery{
		BatchId: req.GetBatchId(), Watermark: strconv.Itoa(k + 1),
		Institution: &connectorv1.Institution{Id: "nbp", Name: "NBP"},
		FxRates:     []*connectorv1.FxRate{{Date: storetest.Day(10 * k), BaseCurrency: "EUR", QuoteCurrency: "PLN", Rate: "4.2840"}},
	}, nil
}

func (standInConn) ImportFile(context.Context, string, *connectorv1.FileHeader, io.Reader) (*connectorv1.Delivery, error) {
	return nil, errors.New("not in this test")
}

// waitCall returns the first call of instance started after after by a
// replica other than notBy, failing after d.
func (s *standIn) waitCall(t *testing.T, instance string, after time.Time, notBy string, d time.Duration) standInCall {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case c := <-s.started:
			if c.instance == instance && c.start.After(after) && c.replica != notBy {
				return c
			}
		case <-timeout:
			t.Fatalf("no call of %s within %s", instance, d)
			return standInCall{}
		}
	}
}

func (s *standIn) snapshot() ([]standInCall, map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls), maps.Clone(s.most)
}

// testReplica is one replica: its leases and its scheduler.
type testReplica struct {
	// apiCut fails the replica's check of the API server.
	apiCut atomic.Bool
	name   string
	st     *replicaStore
	leases *Leases
	sched  *Scheduler
	cancel context.CancelFunc
	done   chan struct{}
}

func startReplica(t *testing.T, name string, shared *store.Store, conn *standIn, targets []Target) *testReplica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &testReplica{name: name, st: &replicaStore{Store: shared}, cancel: cancel, done: make(chan struct{})}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r.leases = NewLeases(LeaseOptions{Store: r.st, Owner: name, TTL: replicaTTL, Renew: replicaRenew, Log: log,
		Apply: func(owned []Target) { r.sched.Update(owned) },
		Check: func(context.Context) error {
			if r.apiCut.Load() {
				return errors.New("the API server does not answer")
			}
			return nil
		}})
	r.sched = NewScheduler(ctx, SchedulerOptions{
		Store: r.st, Connector: standInConn{s: conn, replica: name}, DefaultInterval: replicaInterval,
		Jitter: -1, FirstSyncDelay: -1, Backoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		CallTimeout: 5 * time.Second, Log: log, WorkerContext: r.leases.WorkerContext,
	})
	go func() {
		defer close(r.done)
		r.leases.Run(ctx)
		r.sched.Wait()
	}()
	r.leases.Update(targets)
	t.Cleanup(r.stop)
	return r
}

// stop shuts the replica down as SIGTERM does: its leases are released.
func (r *testReplica) stop() {
	r.cancel()
	<-r.done
}

// kill stops the replica as a crash does: its calls end, and its leases
// stay in the store until they expire.
func (r *testReplica) kill() {
	r.st.dead.Store(true)
	r.stop()
}

// TestReplicasPostgres runs the cases of several replicas on one PostgreSQL
// server, a database each.
func TestReplicasPostgres(t *testing.T) {
	srv, err := pgtest.Start(context.Background())
	if err != nil {
		t.Fatalf("PostgreSQL cannot start here (make test-deps installs it): %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	db := func(t *testing.T) *store.Store { return replicaDatabase(t, srv) }
	t.Run("KilledMidSync", func(t *testing.T) { testReplicasKilledMidSync(t, db(t)) })
	t.Run("CutOffFencesItself", func(t *testing.T) { testReplicaCutOff(t, db(t)) })
	t.Run("StopHandsOver", func(t *testing.T) { testReplicaStopHandsOver(t, db(t)) })
	t.Run("APIServerCutHandsOver", func(t *testing.T) { testReplicaAPIServerCut(t, db(t)) })
}

func replicaDatabase(t *testing.T, srv *pgtest.Server) *store.Store {
	t.Helper()
	dsn, err := srv.NewDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func connectorTargets(names ...string) []Target {
	var out []Target
	for _, n := range names {
		out = append(out, Target{Instance: n, Connector: true})
	}
	return out
}

// checkShared checks what every test of replicas must show: no instance
// ever called by two replicas at once, and no scheduled sync lost (between
// two successful calls of an instance, never more than its interval, a
// call and, once, the takeover bound).
func checkShared(t *testing.T, conn *standIn, names []string) {
	t.Helper()
	calls, most := conn.snapshot()
	for _, n := range names {
		if most[n] > 1 {
			t.Errorf("%s was called by %d replicas at once", n, most[n])
		}
		var starts []time.Time
		for _, c := range calls {
			if c.instance == n && c.ok {
				starts = append(starts, c.start)
			}
		}
		slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
		if len(starts) < 3 {
			t.Errorf("%s was synced %d times, want at least 3", n, len(starts))
			continue
		}
		for i := 1; i < len(starts); i++ {
			if gap := starts[i].Sub(starts[i-1]); gap > replicaInterval+replicaCall+takeoverBound {
				t.Errorf("%s: %s between two syncs, more than the interval and the takeover bound: a sync was lost", n, gap.Round(time.Millisecond))
			}
		}
	}
}

// testReplicasKilledMidSync kills the replica serving a connector in
// the middle of its sync: another replica serves it within the bound, no
// instance is ever called by two replicas at once, every scheduled sync
// happens, and the killed replica's late write is refused.
func testReplicasKilledMidSync(t *testing.T, st *store.Store) {
	names := []string{"c1", "c2", "c3", "c4", "c5", "c6"}
	targets := connectorTargets(names...)
	conn := newStandIn()
	replicas := map[string]*testReplica{}
	for _, n := range []string{"r1", "r2", "r3"} {
		replicas[n] = startReplica(t, n, st, conn, targets)
	}
	time.Sleep(2 * replicaInterval)
	// Every instance is held by exactly one replica.
	held := map[string]string{}
	for _, r := range replicas {
		for _, n := range r.leases.Held() {
			if other, ok := held[n]; ok {
				t.Fatalf("%s is held by %s and %s", n, other, r.name)
			}
			held[n] = r.name
		}
	}
	if len(held) != len(names) {
		t.Fatalf("held: %v, want every one of %v", held, names)
	}
	// Spread: six instances over three replicas, two each.
	for _, r := range replicas {
		if got := r.leases.Held(); len(got) != 2 {
			t.Errorf("%s holds %v, want its share of two", r.name, got)
		}
	}

	mid := conn.waitCall(t, "c1", time.Time{}, "", 3*replicaInterval)
	time.Sleep(replicaCall / 2)
	victim := replicas[mid.replica]
	killed := time.Now()
	victim.kill()
	t.Logf("killed %s in the middle of c1's sync (epoch %d)", victim.name, mid.fence.Epoch)

	next := conn.waitCall(t, "c1", killed, "", takeoverBound+replicaInterval)
	if next.replica == victim.name {
		t.Fatalf("the killed replica called c1 again")
	}
	if waited := next.start.Sub(killed); waited > takeoverBound {
		t.Errorf("c1 waited %s for another replica, more than the bound %s", waited, takeoverBound)
	}
	if next.fence.Epoch <= mid.fence.Epoch {
		t.Errorf("the new holder's epoch %d is not above the killed one's %d", next.fence.Epoch, mid.fence.Epoch)
	}
	t.Logf("%s serves c1 %s after the kill (epoch %d)", next.replica, next.start.Sub(killed).Round(time.Millisecond), next.fence.Epoch)

	// The killed replica's write, had it come late (a process paused, a
	// packet delayed), stores nothing.
	before, err := st.Watermark(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Import(store.WithFence(context.Background(), mid.fence), "c1", store.KindSync, &connectorv1.Delivery{
		BatchId: "late", Watermark: "999", Institution: &connectorv1.Institution{Id: "nbp", Name: "NBP"},
		FxRates: []*connectorv1.FxRate{{Date: "2030-01-01", BaseCurrency: "EUR", QuoteCurrency: "PLN", Rate: "9.9999"}},
	})
	if !errors.Is(err, store.ErrFenced) {
		t.Errorf("the killed replica's late write: %v, want it refused as fenced", err)
	}
	if after, _ := st.Watermark(context.Background(), "c1"); after == "999" {
		t.Errorf("the late write's watermark was stored (before it: %q)", before)
	}
	time.Sleep(3 * replicaInterval)
	for _, r := range replicas {
		if r != victim {
			r.stop()
		}
	}
	checkShared(t, conn, names)
	if calls, _ := conn.snapshot(); slices.ContainsFunc(calls, func(c standInCall) bool { return c.replica == victim.name && c.start.After(killed) }) {
		t.Error("the killed replica called a connector after it was killed")
	}
}

// testReplicaCutOff cuts a replica's lease statements (as a partition from
// the database would): it stops calling and storing before its leases
// expire, by its own deadline, another replica takes its instances once
// they expired, the store refuses its writes after the expiry whatever it
// does, and once the cut heals the two share the instances again.
func testReplicaCutOff(t *testing.T, st *store.Store) {
	names := []string{"c1", "c2", "c3"}
	targets := connectorTargets(names...)
	conn := newStandIn()
	a := startReplica(t, "a", st, conn, targets)
	conn.waitCall(t, "c1", time.Time{}, "", 2*replicaInterval)
	b := startReplica(t, "b", st, conn, targets)
	time.Sleep(replicaInterval)
	// The two share the three: a keeps two, b takes one.
	ha, hb := a.leases.Held(), b.leases.Held()
	if len(ha) != 2 || len(hb) != 1 {
		t.Fatalf("a holds %v, b %v; want a two and b one", ha, hb)
	}
	x := ha[0]
	a.leases.mu.Lock()
	first := standInCall{fence: store.Fence{Instance: x, Owner: a.leases.Owner(), Epoch: a.leases.held[x].epoch}}
	a.leases.mu.Unlock()

	a.st.cut.Store(true)
	cut := time.Now()
	expiry := a.st.leasedAt().Add(replicaTTL) // no lease of a outlives this
	takeover := conn.waitCall(t, x, cut, "a", 2*takeoverBound)
	time.Sleep(2 * replicaInterval)

	calls, _ := conn.snapshot()
	var lastA time.Time
	for _, c := range calls {
		if c.replica == "a" && c.end.After(lastA) {
			lastA = c.end
		}
	}
	if !lastA.Before(expiry) {
		t.Errorf("a's last call ended %s after its leases expired", lastA.Sub(expiry))
	}
	if s := a.st.lastStored(); !s.Before(expiry) {
		t.Errorf("a stored %s after its leases expired", s.Sub(expiry))
	}
	if len(a.leases.Held()) != 0 {
		t.Errorf("a still holds %v while cut off", a.leases.Held())
	}
	t.Logf("cut at 0; a stopped by %s; its leases expired by %s; b took %s at %s",
		lastA.Sub(cut).Round(time.Millisecond), expiry.Sub(cut).Round(time.Millisecond), x, takeover.start.Sub(cut).Round(time.Millisecond))
	// a's data statements still reach the database: the store itself
	// refuses what a would write under its old lease.
	err := a.st.RecordSync(store.WithFence(context.Background(), first.fence), x, store.SyncRecord{At: time.Now(), Error: "late", Next: time.Now()})
	if !errors.Is(err, store.ErrFenced) {
		t.Errorf("a's write after its lease expired: %v, want it refused as fenced", err)
	}
	if got := b.leases.Held(); len(got) != len(names) {
		t.Errorf("b holds %v while a is cut off, want all of %v", got, names)
	}
	// The cut heals: the two share the instances again, within a lease's
	// time and a few renewals; on a loaded machine a renewal late past
	// the deadline makes a replica let go of everything and take its share
	// again a round later, so the wait is bounded, not fixed.
	a.st.cut.Store(false)
	healed := time.Now()
	for {
		ha, hb := a.leases.Held(), b.leases.Held()
		if len(ha)+len(hb) == len(names) && len(ha) > 0 && len(hb) > 0 {
			t.Logf("shared again %s after the cut healed", time.Since(healed).Round(time.Millisecond))
			break
		}
		if time.Since(healed) > replicaTTL+3*replicaRenew+10*time.Second {
			t.Errorf("%s after the cut healed a holds %v, b %v; want the three shared", time.Since(healed).Round(time.Millisecond), ha, hb)
			break
		}
		time.Sleep(replicaRenew / 3)
	}
	a.stop()
	b.stop()
	checkShared(t, conn, names)
}

// testReplicaStopHandsOver stops a replica as a rolling update does:
// it releases its leases, and the other replica serves its instances at
// once, not after their expiry.
func testReplicaStopHandsOver(t *testing.T, st *store.Store) {
	names := []string{"c1", "c2"}
	conn := newStandIn()
	a := startReplica(t, "a", st, conn, connectorTargets(names...))
	conn.waitCall(t, "c1", time.Time{}, "", 2*replicaInterval)
	b := startReplica(t, "b", st, conn, connectorTargets(names...))
	time.Sleep(replicaRenew)
	stopped := time.Now()
	a.stop()
	next := conn.waitCall(t, "c1", stopped, "", takeoverBound+replicaInterval)
	if next.replica != "b" {
		t.Fatalf("c1 called by %s", next.replica)
	}
	// Released: b takes it within a renewal period, and c1 is due by then
	// (it was synced at most an interval ago).
	if waited := next.start.Sub(stopped); waited > replicaInterval+2*replicaRenew+500*time.Millisecond {
		t.Errorf("c1 waited %s after a stopped: the lease was not released", waited)
	}
	time.Sleep(3 * replicaInterval)
	b.stop()
	checkShared(t, conn, names)
}

// testReplicaAPIServerCut cuts a replica from the API server (its check
// fails) while the database still answers: it releases its plugins, once
// its workers stopped, and the other replica serves them within a renewal
// period or two, not after the leases' expiry; it stores nothing after.
func testReplicaAPIServerCut(t *testing.T, st *store.Store) {
	names := []string{"c1", "c2"}
	conn := newStandIn()
	a := startReplica(t, "a", st, conn, connectorTargets(names...))
	b := startReplica(t, "b", st, conn, connectorTargets(names...))
	time.Sleep(replicaInterval)
	ha := a.leases.Held()
	if len(ha) != 1 {
		t.Fatalf("a holds %v, want its share of one", ha)
	}
	x := ha[0]
	cut := time.Now()
	a.apiCut.Store(true)
	next := conn.waitCall(t, x, cut, "a", takeoverBound+replicaInterval)
	if next.replica != "b" {
		t.Fatalf("%s called by %s", x, next.replica)
	}
	handed := time.Now()
	time.Sleep(3 * replicaInterval)
	if got := a.leases.Held(); len(got) != 0 {
		t.Errorf("a holds %v while cut from the API server", got)
	}
	if s := a.st.lastStored(); s.After(handed) {
		t.Errorf("a stored %s after b took over", s.Sub(handed))
	}
	calls, _ := conn.snapshot()
	for _, c := range calls {
		if c.replica == "a" && c.start.After(cut.Add(replicaRenew+replicaCall)) {
			t.Errorf("a called %s %s after it was cut off", c.instance, c.start.Sub(cut))
		}
	}
	t.Logf("cut a from the API server: b serves %s %s later", x, next.start.Sub(cut).Round(time.Millisecond))
	a.stop()
	b.stop()
	checkShared(t, conn, names)
}
