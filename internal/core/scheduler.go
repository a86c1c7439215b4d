package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mathrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/display"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// Defaults of SchedulerOptions.
const (
	// DefaultSyncInterval is how often an instance is synced when the
	// configuration names no interval for it.
	DefaultSyncInterval = time.Hour
	// MinSyncInterval is the shortest interval the core accepts.
	MinSyncInterval = time.Second
	// DefaultJitter is the largest fraction of the interval added at
	// random, so instances started together do not call at once.
	DefaultJitter = 0.1
	// DefaultFirstSyncDelay bounds the random delay of an instance's first
	// sync after it starts running.
	DefaultFirstSyncDelay = 5 * time.Second
	// DefaultWarmAhead is how long before a sync is due the connector's
	// token is got, so that a token to mint (every eight minutes, and on a
	// restarted core's first sync of each instance) does not make the call
	// late.
	DefaultWarmAhead = 2 * time.Second
	// DefaultMaxAttempts bounds the calls of one batch.
	DefaultMaxAttempts = 5
	// DefaultBackoff is the wait before the first retry; it doubles per
	// retry up to DefaultMaxBackoff.
	DefaultBackoff    = time.Second
	DefaultMaxBackoff = time.Minute
	// DefaultCallTimeout bounds one call to a plugin.
	DefaultCallTimeout = 2 * time.Minute
	// storeTimeout bounds storing one delivery, which a change of the
	// instance's grant waits for (checkGrant).
	storeTimeout = time.Minute
)

// Connector calls a plugin's ConnectorService; *Caller is the real one.
type Connector interface {
	Sync(ctx context.Context, instance string, req *connectorv1.SyncRequest) (*connectorv1.Delivery, error)
	ImportFile(ctx context.Context, instance string, header *connectorv1.FileHeader, file io.Reader) (*connectorv1.Delivery, error)
}

// SchedulerOptions configures NewScheduler.
type SchedulerOptions struct {
	Store     Store
	Connector Connector
	// DefaultInterval is used for instances Intervals does not name;
	// zero means DefaultSyncInterval.
	DefaultInterval time.Duration
	// Intervals sets the sync interval per instance.
	Intervals map[string]time.Duration
	// Jitter is the largest fraction of the interval added at random
	// (DefaultJitter when zero, none when negative).
	Jitter float64
	// FirstSyncDelay bounds the random delay before an instance's first
	// sync (DefaultFirstSyncDelay when zero, none when negative).
	FirstSyncDelay time.Duration
	// MaxAttempts, Backoff, MaxBackoff and CallTimeout: zero means the
	// defaults above.
	MaxAttempts         int
	Backoff, MaxBackoff time.Duration
	CallTimeout         time.Duration
	// Clock, Rand and NewBatchID replace the wall clock, the jitter source
	// (a value in [0,1)) and the batch ID generator, for tests.
	Clock      Clock
	Rand       func() float64
	NewBatchID func() string
	Log        *slog.Logger
	// WarmAhead is how long before a sync is due a Connector that can warm
	// (*Caller: the instance's token) is warmed: DefaultWarmAhead when
	// zero, never when negative.
	WarmAhead time.Duration
	// OnStop is called with an instance the scheduler stopped calling.
	OnStop func(instance string)
	// OnStored is called after an import stored new rows (Views.Poke).
	OnStored func()
	// Metrics, when set, count each sync and hold its outcome by instance.
	Metrics *Metrics
	// WorkerContext, when set, derives each worker's context from the one
	// the scheduler gives it: Leases.WorkerContext, whose context carries
	// the lease's fence and ends with the lease.
	WorkerContext func(ctx context.Context, instance string) context.Context
}

// Scheduler calls Sync on every running connector on its schedule (D-49):
// one worker per instance, so never two calls at once for one instance (an
// owner's ImportFile waits for a running Sync too); the stored watermark is
// passed back (D-18); one batch ID per batch, reused on every retry; retries
// with exponential backoff on Unavailable and DeadlineExceeded and on a
// database that failed, none on any other answer (InvalidArgument,
// FailedPrecondition: the connector would answer the same); every outcome is
// recorded with RecordSync. An instance that stops running (revoked,
// uninstalled, without the connector capability) has its worker cancelled:
// no further call, and a call in flight is abandoned.
type Scheduler struct {
	o   SchedulerOptions
	ctx context.Context

	// updating serialises Update; mu guards workers alone, so that Update
	// waiting for a store in progress blocks no reader of the schedule.
	updating sync.Mutex
	mu       sync.Mutex
	workers  map[string]*worker
	wg       sync.WaitGroup
}

type worker struct {
	// ctx is done once the instance stops running; cancel ends it.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// call serialises calls to the instance (Sync and ImportFile).
	call sync.Mutex
	// claimed is closed once the instance is claimed in the store (claim,
	// OF-38 in removed.go); nothing is called or stored before.
	claimed chan struct{}

	// grant is held while a delivery is checked against the target and
	// stored, and by Update while it changes the target or stops the worker,
	// so that a delivery is stored only under the grant as it stands then,
	// not as it stood when the call began (checkGrant).
	grant sync.Mutex
	// stopped is set, under grant, once the instance no longer runs.
	stopped bool

	mu     sync.Mutex
	target Target
	next   time.Time
}

// NewScheduler returns a Scheduler whose workers run until ctx is done.
func NewScheduler(ctx context.Context, o SchedulerOptions) *Scheduler {
	if o.DefaultInterval == 0 {
		o.DefaultInterval = DefaultSyncInterval
	}
	if o.Jitter == 0 {
		o.Jitter = DefaultJitter
	}
	if o.FirstSyncDelay == 0 {
		o.FirstSyncDelay = DefaultFirstSyncDelay
	}
	if o.WarmAhead == 0 {
		o.WarmAhead = DefaultWarmAhead
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.Backoff == 0 {
		o.Backoff = DefaultBackoff
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if o.Rand == nil {
		o.Rand = mathrand.Float64
	}
	if o.NewBatchID == nil {
		o.NewBatchID = newBatchID
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Scheduler{o: o, ctx: ctx, workers: map[string]*worker{}}
}

// newBatchID returns 128 random bits in hex.
func newBatchID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// Update sets the running instances: workers start for new connectors, stop
// for instances no longer among them, and take the new permissions of the
// others. Plugins.WatchPlugins calls it on every change. It returns once no
// delivery can be stored under what it replaced: a store in progress under
// the old grant (one database transaction) is waited for.
func (s *Scheduler) Update(targets []Target) {
	s.updating.Lock()
	defer s.updating.Unlock()
	want := map[string]Target{}
	for _, t := range targets {
		if t.Connector {
			want[t.Instance] = t
		}
	}
	type change struct {
		w *worker
		t Target
	}
	var stopped []string
	var changed []change
	s.mu.Lock()
	for name, w := range s.workers {
		// A new UID is another instance of the name (removed.go): its
		// worker starts afresh and claims it.
		if t, ok := want[name]; !ok || t.UID != w.getTarget().UID {
			w.cancel()
			delete(s.workers, name)
			s.o.Metrics.syncs().stop(name)
			stopped = append(stopped, name)
			changed = append(changed, change{w: w})
		}
	}
	for name, t := range want {
		if w, ok := s.workers[name]; ok {
			if !sameTarget(w.getTarget(), t) {
				changed = append(changed, change{w: w, t: t})
			}
			continue
		}
		ctx, cancel := context.WithCancel(s.ctx)
		if s.o.WorkerContext != nil {
			ctx = s.o.WorkerContext(ctx, name)
		}
		w := &worker{ctx: ctx, cancel: cancel, done: make(chan struct{}), claimed: make(chan struct{}), target: t}
		s.workers[name] = w
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer close(w.done)
			s.run(ctx, name, w)
		}()
		s.o.Log.Info("calling the plugin on its schedule", "plugin", name, "interval", s.interval(name).String())
	}
	s.mu.Unlock()
	// Each change waits for its worker's store in progress, if any (at most
	// storeTimeout); the workers' waits overlap.
	var wg sync.WaitGroup
	for _, c := range changed {
		wg.Go(func() {
			c.w.grant.Lock()
			defer c.w.grant.Unlock()
			if c.t.Instance == "" {
				c.w.stopped = true
				return
			}
			c.w.mu.Lock()
			c.w.target = c.t
			c.w.mu.Unlock()
		})
	}
	wg.Wait()
	for _, name := range stopped {
		s.o.Log.Info("stopped calling the plugin", "plugin", name)
		if s.o.OnStop != nil {
			s.o.OnStop(name)
		}
	}
}

// StopAll stops every worker, as Update with no instance does, and returns
// once each has ended: no call, store or sync record of theirs is in flight
// after it (a restore replaces the record then). Update starts them again.
func (s *Scheduler) StopAll() {
	s.mu.Lock()
	var ws []*worker
	for _, w := range s.workers {
		ws = append(ws, w)
	}
	s.mu.Unlock()
	s.Update(nil)
	for _, w := range ws {
		<-w.done
	}
}

// sameTarget tells whether two targets of one instance grant the same.
func sameTarget(a, b Target) bool {
	return a.Connector == b.Connector && slices.Equal(a.DataTiers, b.DataTiers)
}

// Wait returns once every worker has stopped (after the scheduler's context
// is done).
func (s *Scheduler) Wait() { s.wg.Wait() }

// Instances returns the connectors the scheduler calls now, sorted.
func (s *Scheduler) Instances() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.workers))
	for n := range s.workers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// NextSync returns when the instance's next sync is due, if it is called.
func (s *Scheduler) NextSync(instance string) (time.Time, bool) {
	s.mu.Lock()
	w, ok := s.workers[instance]
	s.mu.Unlock()
	if !ok {
		return time.Time{}, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next, true
}

// Interval returns how often the instance is synced, if it is called:
// `openfief status` says a connector is failing when none of its syncs
// succeeded in twice that.
func (s *Scheduler) Interval(instance string) (time.Duration, bool) {
	s.mu.Lock()
	_, ok := s.workers[instance]
	s.mu.Unlock()
	if !ok {
		return 0, false
	}
	return s.interval(instance), true
}

func (s *Scheduler) interval(instance string) time.Duration {
	if d, ok := s.o.Intervals[instance]; ok && d > 0 {
		return max(d, MinSyncInterval)
	}
	return max(s.o.DefaultInterval, MinSyncInterval)
}

// jitter returns a random duration in [0, frac*d).
func (s *Scheduler) jitter(d time.Duration, frac float64) time.Duration {
	if frac <= 0 || d <= 0 {
		return 0
	}
	return time.Duration(s.o.Rand() * frac * float64(d))
}

// run is one instance's worker: wait, sync, repeat, until ctx is done. The
// claim and each sync run apart, on a goroutine of their own: between syncs
// the worker's goroutine holds only the small stack of this loop, not the
// deep one a call and an import grew, which 10,000 instances waiting out
// their intervals would otherwise keep.
func (s *Scheduler) run(ctx context.Context, instance string, w *worker) {
	var start time.Time
	claimed := false
	apart(func() { start, claimed = s.begin(ctx, instance, w) })
	if !claimed {
		return
	}
	w.setNext(start)
	warm, _ := s.o.Connector.(warmer)
	if s.o.WarmAhead < 0 {
		warm = nil
	}
	for {
		if warm != nil {
			// What the call needs is got ahead of the due time
			// (DefaultWarmAhead), so the call starts on time.
			if lead := w.getNext().Sub(s.o.Clock.Now()) - s.o.WarmAhead; lead > 0 {
				select {
				case <-ctx.Done():
					return
				case <-s.o.Clock.After(lead):
				}
			}
			apart(func() { warm.Warm(ctx, instance) })
		}
		wait := w.getNext().Sub(s.o.Clock.Now())
		select {
		case <-ctx.Done():
			return
		case <-s.o.Clock.After(max(wait, 0)):
		}
		stopped := false
		apart(func() { stopped = s.syncAndRecord(ctx, instance, w) })
		if stopped {
			return // revoked, uninstalled or shutting down
		}
	}
}

// warmer is a Connector that can make ready ahead of a call what the call
// needs (*Caller: the instance's token); what fails is left to the call.
type warmer interface {
	Warm(ctx context.Context, instance string)
}

// apart runs f on a goroutine of its own and returns once f has.
func apart(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

// begin claims the worker's instance and returns when its first sync is
// due; false means the worker stopped first.
func (s *Scheduler) begin(ctx context.Context, instance string, w *worker) (time.Time, bool) {
	if !s.claim(ctx, instance, w) {
		return time.Time{}, false
	}
	first := time.Duration(0)
	if s.o.FirstSyncDelay > 0 {
		first = s.jitter(s.o.FirstSyncDelay, 1)
	}
	now := s.o.Clock.Now()
	start := now.Add(first)
	// A restarted core (or worker) keeps the schedule it recorded, so a
	// restart does not call every connector at once; never later than one
	// interval from now.
	st, serr := s.o.Store.Status(ctx, instance)
	if serr == nil && st.NextSync.After(start) {
		start = st.NextSync
		if limit := now.Add(s.interval(instance)); start.After(limit) {
			start = limit
		}
	}
	s.current(instance, w, func(m *runMetrics) { m.start(instance, s.interval(instance), st, serr == nil) })
	return start, true
}

// syncAndRecord runs one due sync, sets the next and records the outcome;
// true means the worker stopped (its context ended) and records nothing.
func (s *Scheduler) syncAndRecord(ctx context.Context, instance string, w *worker) (stopped bool) {
	interval := s.interval(instance)
	err := s.syncOnce(ctx, instance, w)
	if ctx.Err() != nil {
		return true
	}
	next := s.o.Clock.Now().Add(interval + s.jitter(interval, s.o.Jitter))
	w.setNext(next)
	rec := store.SyncRecord{At: s.o.Clock.Now(), OK: err == nil, Next: next}
	if err != nil {
		// The error can quote the plugin's own words: stored and
		// shown only escaped and bounded (OF-17).
		rec.Error = display.Message(err.Error())
		s.o.Log.Warn("sync failed", "plugin", instance, "error", rec.Error)
	}
	if rerr := s.o.Store.RecordSync(ctx, instance, rec); rerr != nil {
		s.o.Log.Error("recording the sync", "plugin", instance, "error", rerr.Error())
	}
	s.current(instance, w, func(m *runMetrics) { m.done(instance, err, rec.At) })
	return false
}

// current runs f on the sync metrics while w is still instance's worker,
// under the lock Update stops workers with, so that a worker's last
// outcome never brings back the series of an instance that stopped.
func (s *Scheduler) current(instance string, w *worker, f func(*runMetrics)) {
	if s.o.Metrics == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.workers[instance] == w {
		f(s.o.Metrics.sync)
	}
}

// claim makes the worker's instance the store's live instance of its name
// before the worker's first call (store.Claim): data stored for an earlier
// Plugin of the same name is marked removed first. It waits for the Update
// that started the worker, which stops an earlier worker of the name and
// waits for its store in progress. A failing store is retried with backoff
// until it answers or the worker stops; false means the worker stopped.
func (s *Scheduler) claim(ctx context.Context, instance string, w *worker) bool {
	s.updating.Lock()
	//nolint:staticcheck // empty on purpose: the Update that started this worker has returned
	s.updating.Unlock()
	if !claimInstance(ctx, s.o.Store, s.o.Clock, s.o.Log, s.o.Backoff, s.o.MaxBackoff, instance, w.getTarget().UID) {
		return false
	}
	close(w.claimed)
	return true
}

func (w *worker) setNext(t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next = t
}

func (w *worker) getNext() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next
}

func (w *worker) getTarget() Target {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.target
}

// syncOnce runs one batch: the stored watermark, one batch ID, the call and
// the import, retried as Scheduler describes.
func (s *Scheduler) syncOnce(ctx context.Context, instance string, w *worker) error {
	w.call.Lock()
	defer w.call.Unlock()
	batch := s.o.NewBatchID()
	for attempt := 1; ; attempt++ {
		res, err := s.attempt(ctx, instance, w, batch)
		if err == nil {
			s.o.Log.Info("synced", "plugin", instance, "batch", batch, "attempt", attempt,
				"transactions", res.Transactions, "balances", res.Balances, "prices", res.Prices,
				"fxRates", res.FxRates, "indexReadings", res.IndexReadings, "problems", res.Problems, "duplicate", res.Duplicate)
			return nil
		}
		if !retryable(err) || attempt >= s.o.MaxAttempts || ctx.Err() != nil {
			if attempt > 1 {
				return fmt.Errorf("after %d attempts: %w", attempt, err)
			}
			return err
		}
		wait := min(s.o.Backoff<<(attempt-1), s.o.MaxBackoff)
		s.o.Log.Info("sync will be retried", "plugin", instance, "batch", batch, "attempt", attempt, "in", wait.String(), "error", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.o.Clock.After(wait):
		}
	}
}

// attempt is one call and, if it answers, one import.
func (s *Scheduler) attempt(ctx context.Context, instance string, w *worker, batch string) (store.ImportResult, error) {
	watermark, err := s.o.Store.Watermark(ctx, instance)
	if err != nil {
		return store.ImportResult{}, storeError{fmt.Errorf("reading the watermark: %w", err)}
	}
	cctx, cancel := context.WithTimeout(ctx, s.o.CallTimeout)
	defer cancel()
	d, err := s.o.Connector.Sync(cctx, instance, &connectorv1.SyncRequest{BatchId: batch, Watermark: watermark})
	if err != nil {
		return store.ImportResult{}, fmt.Errorf("calling Sync: %w", err)
	}
	return s.accept(ctx, instance, w, batch, store.KindSync, d)
}

// accept checks a delivery against the batch and the instance's data tiers
// as they stand now (checkGrant) and imports it whole.
func (s *Scheduler) accept(ctx context.Context, instance string, w *worker, batch string, kind store.Kind, d *connectorv1.Delivery) (store.ImportResult, error) {
	if d.GetBatchId() != batch {
		return store.ImportResult{}, fmt.Errorf("%w: sent %q, got %q", ErrBatchMismatch, batch, d.GetBatchId())
	}
	w.grant.Lock()
	defer w.grant.Unlock()
	if err := w.checkGrant(instance, d); err != nil {
		return store.ImportResult{}, err
	}
	// Bounded, since a change of the grant waits for it; a store that takes
	// longer is rolled back and retried like a database that failed.
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	res, err := s.o.Store.Import(sctx, instance, kind, d)
	if err != nil {
		if isInvalidDelivery(err) {
			return store.ImportResult{}, err // "store: delivery refused: <field>: <rule>"
		}
		return store.ImportResult{}, storeError{fmt.Errorf("storing the delivery: %w", err)}
	}
	if res.Rows() > 0 && s.o.OnStored != nil {
		s.o.OnStored()
	}
	return res, nil
}

// storeError marks a database failure: the batch is retried, since nothing
// of it was stored.
type storeError struct{ err error }

func (e storeError) Error() string { return e.err.Error() }
func (e storeError) Unwrap() error { return e.err }

// retryable tells the answers a retry may change: the plugin or its
// institution unavailable, a deadline exceeded, the database failing.
func retryable(err error) bool {
	var se storeError
	if errors.As(err, &se) {
		return true
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded:
		return true
	}
	return false
}

// ImportFile streams an owner's file to the instance's ImportFile and, unless
// preview, imports the delivery as a file batch (D-49). It waits for a Sync
// of the same instance in flight. It is not retried: the owner sees the
// outcome and may send the file again, which imports nothing twice (D-18).
func (s *Scheduler) ImportFile(ctx context.Context, instance, fileName, mediaType string, preview bool, file io.Reader) (store.ImportResult, error) {
	s.mu.Lock()
	w, ok := s.workers[instance]
	s.mu.Unlock()
	if !ok {
		return store.ImportResult{}, fmt.Errorf("plugin %q: %w", instance, ErrNotConnector)
	}
	select {
	case <-w.claimed:
	case <-w.ctx.Done():
		return store.ImportResult{}, fmt.Errorf("plugin %q: %w", instance, ErrNotConnector)
	case <-ctx.Done():
		return store.ImportResult{}, ctx.Err()
	}
	w.call.Lock()
	defer w.call.Unlock()
	batch := s.o.NewBatchID()
	mode := connectorv1.IngestMode_INGEST_MODE_IMPORT
	if preview {
		mode = connectorv1.IngestMode_INGEST_MODE_PREVIEW
	}
	// The call ends with the owner's request or when the instance stops
	// running, whichever comes first.
	cctx, cancel := context.WithTimeout(ctx, s.o.CallTimeout)
	defer cancel()
	defer context.AfterFunc(w.ctx, cancel)()
	d, err := s.o.Connector.ImportFile(cctx, instance, &connectorv1.FileHeader{
		BatchId: batch, Mode: mode, FileName: baseName(fileName), MediaType: mediaType,
	}, file)
	if err != nil {
		return store.ImportResult{}, fmt.Errorf("calling ImportFile: %w", err)
	}
	if preview {
		if d.GetBatchId() != batch {
			return store.ImportResult{}, fmt.Errorf("%w: sent %q, got %q", ErrBatchMismatch, batch, d.GetBatchId())
		}
		w.grant.Lock()
		defer w.grant.Unlock()
		if err := w.checkGrant(instance, d); err != nil {
			return store.ImportResult{}, err
		}
		return countDelivery(d), nil
	}
	actx, acancel := context.WithCancel(ctx)
	defer acancel()
	if f, ok := store.FenceOf(w.ctx); ok {
		// Stored under the lease of the replica serving the instance.
		actx = store.WithFence(actx, f)
	}
	defer context.AfterFunc(w.ctx, acancel)()
	return s.accept(actx, instance, w, batch, store.KindFile, d)
}

// baseName drops any directory from an uploaded file's name: the contract
// sends the name without one.
func baseName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// countDelivery is what a preview reports: the rows an import would bring.
func countDelivery(d *connectorv1.Delivery) store.ImportResult {
	postings := 0
	for _, t := range d.GetTransactions() {
		postings += len(t.GetPostings())
	}
	return store.ImportResult{
		Transactions: len(d.GetTransactions()), Balances: len(d.GetBalanceAssertions()),
		Prices: len(d.GetPrices()), FxRates: len(d.GetFxRates()),
		IndexReadings: len(d.GetIndexReadings()), Problems: len(d.GetProblems()),
		Postings: postings,
	}
}
