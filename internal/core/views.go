package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/display"
)

// Defaults of ViewOptions.
const (
	// DefaultExportInterval is how often a view is sent what is new when
	// no import announced anything; imports announce new entries at once
	// (Views.Poke), so the interval is a safety net and the pace of
	// retries after a failed run.
	DefaultExportInterval = time.Hour
	// DefaultExportSettle is how long a view waits after an import
	// announced new entries, so that the imports of one round of syncs
	// leave in one run rather than one run each.
	DefaultExportSettle = 2 * time.Second
)

// ViewOptions configures NewViews.
type ViewOptions struct {
	// Exporter sends the pages. When its Tiers is nil, Views sets it to
	// the tiers of the targets Update was last given: the grant as the
	// core's watch of Plugins saw it last.
	Exporter *Exporter
	// Store records each run's outcome, as the scheduler records a sync's.
	Store Store
	// Interval is the longest a view goes without a run (0:
	// DefaultExportInterval); Settle the wait after a Poke (0:
	// DefaultExportSettle, negative: none).
	Interval, Settle time.Duration
	// FirstDelay bounds the random delay of a view's first run (0:
	// DefaultFirstSyncDelay, negative: none).
	FirstDelay time.Duration
	// MaxAttempts, Backoff and MaxBackoff bound the retries of a run that
	// failed on Unavailable, DeadlineExceeded or the database; zero means
	// the scheduler's defaults.
	MaxAttempts         int
	Backoff, MaxBackoff time.Duration
	Clock               Clock
	Rand                func() float64
	NewRunID            func() string
	Log                 *slog.Logger
	// Metrics, when set, count each export and hold its outcome by view.
	Metrics *Metrics
	// WorkerContext is SchedulerOptions.WorkerContext for the views'
	// workers.
	WorkerContext func(ctx context.Context, instance string) context.Context
}

// Views runs every view instance's exports (OF-35): one worker per view, so
// never two runs at once for one view; a run when imports stored new
// entries (Poke), and at the latest every Interval. Each run's outcome is
// recorded like a sync's, so `openfief plugin status` shows a view's last
// export. A view that stops running has its worker cancelled: no page
// after that, and a call in flight is abandoned.
type Views struct {
	o   ViewOptions
	ctx context.Context

	// mu guards the workers, the views' tiers and the pages held for
	// sending: Update changes the tiers and stops the held pages they no
	// longer allow under it, Hold checks the tiers and holds a page under it.
	mu      sync.Mutex
	workers map[string]*viewWorker
	tiers   map[string][]string
	held    map[*heldPage]string
	wg      sync.WaitGroup
}

// heldPage is a page being sent to a view under tiers (Views.Hold).
type heldPage struct {
	tiers  []string
	cancel context.CancelCauseFunc
	// released is closed once the page's call has returned.
	released chan struct{}
}

type viewWorker struct {
	uid    string
	cancel context.CancelFunc
	done   chan struct{}
	// poke holds one pending announcement of new entries.
	poke chan struct{}

	mu   sync.Mutex
	next time.Time
}

// NewViews returns Views whose workers run until ctx is done.
func NewViews(ctx context.Context, o ViewOptions) *Views {
	if o.Interval <= 0 {
		o.Interval = DefaultExportInterval
	}
	if o.Settle == 0 {
		o.Settle = DefaultExportSettle
	}
	if o.FirstDelay == 0 {
		o.FirstDelay = DefaultFirstSyncDelay
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if o.Rand == nil {
		o.Rand = mathrand.Float64
	}
	if o.NewRunID == nil {
		o.NewRunID = newBatchID
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	v := &Views{o: o, ctx: ctx, workers: map[string]*viewWorker{}, tiers: map[string][]string{}, held: map[*heldPage]string{}}
	if o.Exporter.Tiers == nil {
		o.Exporter.Tiers, o.Exporter.Hold = v.Tiers, v.Hold
	}
	return v
}

// ErrNotView is wrapped when an instance is not a running view.
var ErrNotView = errors.New("not a running view")

// Tiers returns a running view's effective data tiers as Update was last
// given them.
func (v *Views) Tiers(_ context.Context, instance string) ([]string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	t, ok := v.tiers[instance]
	if !ok {
		return nil, fmt.Errorf("plugin %q: %w", instance, ErrNotView)
	}
	return slices.Clone(t), nil
}

// Hold is Exporter.Hold for the running views: under the lock Update
// changes the tiers with, it refuses a page read under tiers the view no
// longer holds every one of (ErrGrantChanged), and holds the page
// otherwise. An Update that takes one of those tiers away, or stops the
// view, cancels the page's context with the cause ErrGrantChanged and
// returns only once release was called, so that a page read under a tier
// is not sent once a change narrowing it is applied, without holding the
// lock across the call.
func (v *Views) Hold(ctx context.Context, instance string, tiers []string) (context.Context, func(), error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now, ok := v.tiers[instance]
	if !ok {
		return nil, nil, fmt.Errorf("plugin %q: %w", instance, ErrNotView)
	}
	if !holdsAll(now, tiers) {
		return nil, nil, fmt.Errorf("%w (from %v to %v) before the page was sent", ErrGrantChanged, tiers, now)
	}
	sctx, cancel := context.WithCancelCause(ctx)
	p := &heldPage{tiers: slices.Clone(tiers), cancel: cancel, released: make(chan struct{})}
	v.held[p] = instance
	return sctx, func() {
		v.mu.Lock()
		delete(v.held, p)
		v.mu.Unlock()
		cancel(nil)
		close(p.released)
	}, nil
}

// holdsAll tells whether have holds every one of want.
func holdsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// Update sets the running instances: a worker starts for each new view
// (claiming its instance in the store first, as a connector's does) and
// stops for each instance that is no longer one, or is another Plugin of
// the same name. It returns once the stopped workers have ended, so that no
// page of theirs moves a view's place after it: the core marks a removed
// instance's data only then. A view's tiers are not kept in the worker:
// the Exporter asks for them before every page, and a page held for
// sending under a tier the new tiers lack is stopped, and waited for, before
// Update returns (Hold).
func (v *Views) Update(targets []Target) {
	want := map[string]Target{}
	tiers := map[string][]string{}
	for _, t := range targets {
		if t.View {
			want[t.Instance] = t
			tiers[t.Instance] = slices.Clone(t.DataTiers)
		}
	}
	var stopped []*viewWorker
	var narrowed []*heldPage
	v.mu.Lock()
	v.tiers = tiers
	for p, name := range v.held {
		if !holdsAll(tiers[name], p.tiers) {
			p.cancel(ErrGrantChanged)
			narrowed = append(narrowed, p)
		}
	}
	for name, w := range v.workers {
		if t, ok := want[name]; !ok || t.UID != w.uid {
			w.cancel()
			delete(v.workers, name)
			v.o.Metrics.exports().stop(name)
			stopped = append(stopped, w)
			v.o.Log.Info("no longer exporting to the view", "plugin", name)
		}
	}
	for name, t := range want {
		if _, ok := v.workers[name]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(v.ctx)
		if v.o.WorkerContext != nil {
			ctx = v.o.WorkerContext(ctx, name)
		}
		w := &viewWorker{uid: t.UID, cancel: cancel, done: make(chan struct{}), poke: make(chan struct{}, 1)}
		v.workers[name] = w
		v.wg.Add(1)
		go func() {
			defer v.wg.Done()
			defer close(w.done)
			if claimInstance(ctx, v.o.Store, v.o.Clock, v.o.Log, v.o.Backoff, v.o.MaxBackoff, name, w.uid) {
				v.run(ctx, name, w)
			}
		}()
		v.o.Log.Info("exporting to the view", "plugin", name, "interval", v.o.Interval.String())
	}
	v.mu.Unlock()
	for _, p := range narrowed {
		<-p.released
	}
	for _, w := range stopped {
		<-w.done
	}
}

// Poke announces new entries: every view runs after the settle time.
func (v *Views) Poke() {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, w := range v.workers {
		select {
		case w.poke <- struct{}{}:
		default: // one is already pending
		}
	}
}

// Instances returns the views exported to now, sorted.
func (v *Views) Instances() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	names := make([]string, 0, len(v.workers))
	for n := range v.workers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// NextRun returns when the view's next run is due at the latest, if it is
// exported to.
func (v *Views) NextRun(instance string) (time.Time, bool) {
	v.mu.Lock()
	w, ok := v.workers[instance]
	v.mu.Unlock()
	if !ok {
		return time.Time{}, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next, true
}

// Interval is the longest a view goes without a run.
func (v *Views) Interval() time.Duration { return v.o.Interval }

// Wait returns once every worker has stopped (after the context is done).
func (v *Views) Wait() { v.wg.Wait() }

func (w *viewWorker) setNext(t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next = t
}

// run is one view's worker: wait for a poke or the interval, export,
// record, repeat, until ctx is done.
func (v *Views) run(ctx context.Context, instance string, w *viewWorker) {
	first := time.Duration(0)
	if v.o.FirstDelay > 0 {
		first = time.Duration(v.o.Rand() * float64(v.o.FirstDelay))
	}
	wait := first
	last, lerr := v.o.Store.Status(ctx, instance)
	v.current(instance, w, func(m *runMetrics) { m.start(instance, v.o.Interval, last, lerr == nil) })
	for {
		w.setNext(v.o.Clock.Now().Add(wait))
		select {
		case <-ctx.Done():
			return
		case <-v.o.Clock.After(wait):
		case <-w.poke:
			if v.o.Settle > 0 {
				select {
				case <-ctx.Done():
					return
				case <-v.o.Clock.After(v.o.Settle):
				}
			}
		}
		// Announcements during the settle time are in this run.
		select {
		case <-w.poke:
		default:
		}
		res, err := v.exportOnce(ctx, instance)
		if ctx.Err() != nil {
			return // stopped: revoked, uninstalled or shutting down
		}
		wait = v.o.Interval
		rec := store.SyncRecord{At: v.o.Clock.Now(), OK: err == nil, Next: v.o.Clock.Now().Add(wait)}
		if err != nil {
			// The error can quote the view's own words: kept and shown
			// only escaped and bounded.
			rec.Error = display.Message(err.Error())
			v.o.Log.Warn("export failed", "plugin", instance, "error", rec.Error)
		} else if res.Entries > 0 {
			v.o.Log.Info("exported", "plugin", instance, "pages", res.Pages, "entries", res.Entries)
		}
		if rerr := v.o.Store.RecordSync(ctx, instance, rec); rerr != nil {
			v.o.Log.Error("recording the export", "plugin", instance, "error", rerr.Error())
		}
		v.current(instance, w, func(m *runMetrics) { m.done(instance, err, rec.At) })
	}
}

// current runs f on the export metrics while w is still instance's worker
// (Scheduler.current).
func (v *Views) current(instance string, w *viewWorker, f func(*runMetrics)) {
	if v.o.Metrics == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.workers[instance] == w {
		f(v.o.Metrics.export)
	}
}

// exportOnce is one run with its retries: a run the view or the database
// failed for a while (Unavailable, DeadlineExceeded, the store) is tried
// again after a backoff; a run stopped by a changed grant starts again at
// once under the grant as it stands then. Entries a failed attempt sent
// are sent again, since the view's place moved only past pages it kept.
func (v *Views) exportOnce(ctx context.Context, instance string) (ExportResult, error) {
	var total ExportResult
	for attempt := 1; ; attempt++ {
		res, err := v.o.Exporter.Run(ctx, instance, v.o.NewRunID())
		total.Pages += res.Pages
		total.Entries += res.Entries
		if err == nil {
			return total, nil
		}
		if attempt >= v.o.MaxAttempts || ctx.Err() != nil {
			if attempt > 1 {
				return total, fmt.Errorf("after %d attempts: %w", attempt, err)
			}
			return total, err
		}
		if errors.Is(err, ErrGrantChanged) {
			continue
		}
		if !retryable(err) {
			return total, err
		}
		wait := min(v.o.Backoff<<(attempt-1), v.o.MaxBackoff)
		v.o.Log.Info("export will be retried", "plugin", instance, "attempt", attempt, "in", wait.String(), "error", err.Error())
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-v.o.Clock.After(wait):
		}
	}
}
