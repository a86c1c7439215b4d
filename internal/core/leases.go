package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/arkadiuss/openfief/internal/core/store"
)

// Several replicas of the core on one PostgreSQL database: every replica
// watches the Plugins and answers both APIs, and each connector and view is
// served by the one replica that holds its lease in the store
// (store/leases.go). Leases renews the leases this replica holds, takes
// those of running instances that nobody holds (never held, released, or
// expired with a replica that died or lost the database), and hands the
// scheduler and the views only the instances it holds. Every write of a
// worker carries the lease's fence, so the store refuses it once the lease
// has changed hands or expired. A replica that cannot renew stops its
// workers on its own before its leases expire (the local deadline, a
// margin short of the expiry), and the store refuses their writes after the
// expiry whatever happens.

// Defaults of LeaseOptions.
const (
	// DefaultLeaseTTL is how long a lease lasts without renewal: the
	// longest an instance waits for another replica after its replica
	// died or was cut off, plus DefaultLeaseRenew until a replica notices.
	DefaultLeaseTTL = 15 * time.Second
	// DefaultLeaseRenew is how often a replica renews its leases (one
	// statement for all of them) and looks for instances nobody serves.
	DefaultLeaseRenew = 5 * time.Second
)

// LeaseStore is what leases need of the store; *store.Store is it.
type LeaseStore interface {
	AcquireLease(ctx context.Context, instance, owner, address string, ttl time.Duration) (int64, bool, error)
	RenewLeases(ctx context.Context, owner string, ttl time.Duration) ([]store.Lease, error)
	ReleaseLease(ctx context.Context, instance, owner string, epoch int64) error
	HeldLeases(ctx context.Context) ([]store.Lease, error)
	Holder(ctx context.Context, instance string) (store.Lease, bool, error)
	Heartbeat(ctx context.Context, owner string, ttl time.Duration) error
	LiveReplicas(ctx context.Context) (int, error)
	Depart(ctx context.Context, owner string) error
}

// LeaseOptions configures NewLeases.
type LeaseOptions struct {
	Store LeaseStore
	// Owner names this replica in the store (the pod's name); a random
	// suffix makes every process's name its own, so a restarted pod never
	// passes for the one before it.
	Owner string
	// Address is where this replica's owner API answers other replicas
	// (the pod's IP and the owner port), kept with its leases so that an
	// owner's import reaching another replica is passed on to it.
	Address string
	// TTL, Renew: zero means the defaults. Margin is how long before the
	// lease expires (by the time the renewal was sent) the replica stops
	// its workers if no renewal came through: Renew when zero. TTL must
	// exceed Renew plus Margin.
	TTL, Renew, Margin time.Duration
	// Apply hands the scheduler and the views the running instances this
	// replica holds (Scheduler.Update and Views.Update).
	Apply func(owned []Target)
	// Check, when set, tells whether this replica can do its work besides
	// the database: the API server answering (its Plugins watch, the
	// tokens it calls plugins with). While it fails the replica releases
	// every lease, once its workers stopped, and takes none, so the others
	// serve its plugins.
	Check func(ctx context.Context) error
	Log   *slog.Logger
}

// Leases is one replica's share of the instances.
type Leases struct {
	o     LeaseOptions
	owner string
	kick  chan struct{}

	mu sync.Mutex
	// targets are the running instances as the watch last reported them.
	targets []Target
	// dirty asks the next round to Apply even if nothing changed (after a
	// restore paused the workers, say).
	dirty bool
	held  map[string]*heldLease
	// deadline is when this replica stops its workers unless a renewal
	// came through before; watchdog fires then.
	deadline time.Time
	watchdog *time.Timer
	// applied is what Apply was last given: instance and epoch.
	applied map[string]int64
}

// heldLease is a lease this replica holds; ctx ends when it is lost,
// released, or its local deadline passed.
type heldLease struct {
	epoch  int64
	ctx    context.Context
	cancel context.CancelFunc
}

// NewLeases returns the leases of a replica; Run serves them.
func NewLeases(o LeaseOptions) *Leases {
	if o.TTL == 0 {
		o.TTL = DefaultLeaseTTL
	}
	if o.Renew == 0 {
		o.Renew = DefaultLeaseRenew
	}
	if o.Margin == 0 {
		o.Margin = o.Renew
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	owner := hex.EncodeToString(b[:])
	if o.Owner != "" {
		owner = o.Owner + "-" + owner
	}
	return &Leases{o: o, owner: owner, kick: make(chan struct{}, 1), held: map[string]*heldLease{}, applied: map[string]int64{}}
}

// Owner is this replica's name in the store.
func (l *Leases) Owner() string { return l.owner }

// Update sets the running instances (the Plugins watch's list); the next
// round, at once, takes and releases leases by it.
func (l *Leases) Update(targets []Target) {
	l.mu.Lock()
	l.targets = slices.Clone(targets)
	l.dirty = true
	l.mu.Unlock()
	l.poke()
}

func (l *Leases) poke() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Held returns the instances this replica holds, sorted.
func (l *Leases) Held() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.held))
	for n := range l.held {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Holds tells whether this replica holds instance's lease now.
func (l *Leases) Holds(instance string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[instance] != nil
}

// Running returns instance's target if the watch reports it running.
func (l *Leases) Running(instance string) (Target, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range l.targets {
		if t.Instance == instance {
			return t, true
		}
	}
	return Target{}, false
}

// WorkerContext is the scheduler's and the views' SchedulerOptions.
// WorkerContext: a worker's context carries its lease's fence and ends
// with the lease. An instance this replica does not hold gets an ended
// context.
func (l *Leases) WorkerContext(parent context.Context, instance string) context.Context {
	l.mu.Lock()
	h := l.held[instance]
	l.mu.Unlock()
	ctx, cancel := context.WithCancel(parent)
	if h == nil {
		cancel()
		return ctx
	}
	context.AfterFunc(h.ctx, cancel)
	return store.WithFence(ctx, store.Fence{Instance: instance, Owner: l.owner, Epoch: h.epoch})
}

// Run serves the leases until ctx ends, then stops the workers and
// releases every lease, so other replicas take them at once.
func (l *Leases) Run(ctx context.Context) {
	t := time.NewTicker(l.o.Renew)
	defer t.Stop()
	for {
		l.round(ctx)
		select {
		case <-ctx.Done():
			l.releaseAll()
			return
		case <-t.C:
		case <-l.kick:
		}
	}
}

// round renews the leases held, drops those lost, releases those of
// instances no longer running, takes those nobody holds, and applies what
// changed.
func (l *Leases) round(ctx context.Context) {
	start := time.Now()
	if l.o.Check != nil {
		cctx, cancel := context.WithTimeout(ctx, l.o.Renew)
		err := l.o.Check(cctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			l.o.Log.Warn("the API server does not answer: handing every plugin to the other replicas", "error", err.Error())
			l.release(ctx, 0)
			l.apply()
			// Counted no more in the others' shares, so they take all.
			dctx, cancel := context.WithTimeout(ctx, l.o.Renew)
			_ = l.o.Store.Depart(dctx, l.owner)
			cancel()
			return
		}
	}
	l.mu.Lock()
	had := len(l.held) > 0
	l.mu.Unlock()
	// The heartbeat goes first: it expires no later than the leases
	// renewed after it, so once a dead replica's leases are free the
	// others no longer count it in their share.
	share := l.share(ctx)
	renewed := !had
	if had {
		rctx, cancel := context.WithTimeout(ctx, l.o.TTL)
		got, err := l.o.Store.RenewLeases(rctx, l.owner, l.o.TTL)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			l.o.Log.Warn("renewing the leases failed: the workers stop at the local deadline unless a renewal comes through", "error", err.Error())
		} else {
			renewed = true
			l.keep(got)
		}
	}
	if renewed {
		l.extend(start.Add(l.o.TTL - l.o.Margin))
	}
	l.apply()
	l.release(ctx, share)
	l.acquire(ctx, renewed, share)
	l.apply()
}

// share sends this replica's heartbeat and returns how many instances it
// should hold at most, so that the replicas spread them evenly: the
// running instances over the live replicas, rounded up. Without an answer
// from the store there is no cap.
func (l *Leases) share(ctx context.Context) int {
	hctx, cancel := context.WithTimeout(ctx, l.o.Renew)
	defer cancel()
	if err := l.o.Store.Heartbeat(hctx, l.owner, l.o.TTL); err != nil {
		return math.MaxInt
	}
	n, err := l.o.Store.LiveReplicas(hctx)
	if err != nil || n < 1 {
		return math.MaxInt
	}
	l.mu.Lock()
	wanted := len(l.wanted())
	l.mu.Unlock()
	return (wanted + n - 1) / n
}

// keep drops the leases the renewal did not return (taken over or expired)
// or returned under another epoch.
func (l *Leases) keep(got []store.Lease) {
	epochs := map[string]int64{}
	for _, g := range got {
		epochs[g.Instance] = g.Epoch
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, h := range l.held {
		if e, ok := epochs[name]; !ok || e != h.epoch {
			h.cancel()
			delete(l.held, name)
			l.o.Log.Warn("lost the lease: another replica serves the plugin", "plugin", name)
		}
	}
}

// extend moves the local deadline to d and arms the watchdog.
func (l *Leases) extend(d time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deadline = d
	if l.watchdog != nil {
		l.watchdog.Stop()
	}
	l.watchdog = time.AfterFunc(time.Until(d), l.expire)
}

// expire is the watchdog: once the local deadline passed without a renewal,
// every worker stops before the leases can expire in the store.
func (l *Leases) expire() {
	l.mu.Lock()
	if time.Now().Before(l.deadline) || len(l.held) == 0 {
		l.mu.Unlock()
		return
	}
	for name, h := range l.held {
		h.cancel()
		delete(l.held, name)
	}
	l.mu.Unlock()
	l.o.Log.Warn("the leases were not renewed in time: stopped serving every plugin until they are taken again")
	l.poke()
}

// release gives up the leases of instances no longer running, and those
// above this replica's share (the last by name: another replica under its
// share takes them within a renewal period), once Apply has stopped their
// workers.
func (l *Leases) release(ctx context.Context, share int) {
	l.mu.Lock()
	want := l.wanted()
	var gone []string
	var epochs []int64
	drop := func(name string) {
		h := l.held[name]
		h.cancel()
		delete(l.held, name)
		gone = append(gone, name)
		epochs = append(epochs, h.epoch)
	}
	for name := range l.held {
		if _, ok := want[name]; !ok {
			drop(name)
		}
	}
	if excess := len(l.held) - share; excess > 0 {
		names := make([]string, 0, len(l.held))
		for n := range l.held {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names[len(names)-excess:] {
			drop(n)
			l.o.Log.Info("handing the plugin to another replica, so that each serves its share", "plugin", n)
		}
	}
	l.mu.Unlock()
	if len(gone) == 0 {
		return
	}
	l.apply()
	ctx, cancel := context.WithTimeout(ctx, l.o.TTL)
	defer cancel()
	for i, name := range gone {
		if err := l.o.Store.ReleaseLease(ctx, name, l.owner, epochs[i]); err != nil {
			l.o.Log.Warn("releasing a lease", "plugin", name, "error", err.Error())
		}
	}
}

// acquire takes the leases of running instances nobody holds.
func (l *Leases) acquire(ctx context.Context, renewed bool, share int) {
	l.mu.Lock()
	room := share - len(l.held)
	var free []string
	for name := range l.wanted() {
		if l.held[name] == nil {
			free = append(free, name)
		}
	}
	l.mu.Unlock()
	if len(free) == 0 || room <= 0 {
		return
	}
	// Every statement of the loop is bounded: a connection that hangs
	// must not stop the renewals once it is back.
	ctx, cancel := context.WithTimeout(ctx, l.o.TTL)
	defer cancel()
	held, err := l.o.Store.HeldLeases(ctx)
	if err != nil {
		l.o.Log.Warn("reading the leases failed", "error", err.Error())
		return
	}
	taken := map[string]bool{}
	for _, h := range held {
		if h.Owner != l.owner {
			taken[h.Instance] = true
		}
	}
	slices.Sort(free)
	for _, name := range free {
		if taken[name] || ctx.Err() != nil {
			continue
		}
		if room <= 0 || l.pastTaking() {
			break
		}
		sent := time.Now()
		epoch, ok, err := l.o.Store.AcquireLease(ctx, name, l.owner, l.o.Address, l.o.TTL)
		if err != nil {
			l.o.Log.Warn("taking a lease failed", "plugin", name, "error", err.Error())
			continue
		}
		if !ok {
			continue
		}
		l.mu.Lock()
		if !renewed && len(l.held) == 0 {
			// A failed renewal left nothing held and no deadline to keep:
			// this lease's own.
			l.mu.Unlock()
			l.extend(sent.Add(l.o.TTL - l.o.Margin))
			l.mu.Lock()
		}
		hctx, cancel := context.WithCancel(context.Background())
		l.held[name] = &heldLease{epoch: epoch, ctx: hctx, cancel: cancel}
		room--
		l.mu.Unlock()
		l.o.Log.Info("took the lease: this replica serves the plugin", "plugin", name, "epoch", epoch)
	}
}

// pastTaking tells whether acquire should leave the leases not yet taken to
// the next round: while the replica holds some, taking more one by one
// stops a renewal period before its local deadline, so the next round
// renews what was taken before the watchdog stops every worker. With
// 10,000 instances on a loaded database one round could not take them
// all before the deadline; they are now taken over a few rounds.
func (l *Leases) pastTaking() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held) > 0 && time.Now().After(l.deadline.Add(-l.o.Renew))
}

// wanted maps the running instances by name; l.mu is held.
func (l *Leases) wanted() map[string]Target {
	out := make(map[string]Target, len(l.targets))
	for _, t := range l.targets {
		out[t.Instance] = t
	}
	return out
}

// apply hands the scheduler and the views the running instances held, if
// that changed since the last time (or a restore asked for it again).
func (l *Leases) apply() {
	l.mu.Lock()
	now := map[string]int64{}
	var owned []Target
	for _, t := range l.targets {
		if h := l.held[t.Instance]; h != nil {
			now[t.Instance] = h.epoch
			owned = append(owned, t)
		}
	}
	changed := l.dirty || len(now) != len(l.applied)
	for n, e := range now {
		if l.applied[n] != e {
			changed = true
		}
	}
	// A lease lost and taken again under a new epoch must restart the
	// worker: the scheduler keeps a worker whose target is unchanged, so it
	// first goes without it.
	restart := map[string]bool{}
	for _, t := range owned {
		if e, ok := l.applied[t.Instance]; ok && e != now[t.Instance] {
			restart[t.Instance] = true
		}
	}
	l.applied, l.dirty = now, false
	l.mu.Unlock()
	if !changed {
		return
	}
	if len(restart) > 0 {
		l.o.Apply(slices.DeleteFunc(slices.Clone(owned), func(t Target) bool { return restart[t.Instance] }))
	}
	l.o.Apply(owned)
}

// releaseAll, on shutdown, stops every worker and releases every lease.
func (l *Leases) releaseAll() {
	l.mu.Lock()
	held := l.held
	l.held = map[string]*heldLease{}
	if l.watchdog != nil {
		l.watchdog.Stop()
	}
	l.mu.Unlock()
	for _, h := range held {
		h.cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for name, h := range held {
		if err := l.o.Store.ReleaseLease(ctx, name, l.owner, h.epoch); err != nil {
			l.o.Log.Warn("releasing a lease", "plugin", name, "error", err.Error())
		}
	}
	if err := l.o.Store.Depart(ctx, l.owner); err != nil {
		l.o.Log.Warn("leaving the replicas", "error", err.Error())
	}
}

// replicatedStore is a store that can say whether it is PostgreSQL, where
// the core keeps leases; *store.Store is one.
type replicatedStore interface {
	LeaseStore
	Postgres() bool
}

// CheckLeases checks the lease settings (zero: the defaults): the lease
// must outlast two renewal periods, one to renew in and one of margin.
func CheckLeases(ttl, renew time.Duration) error {
	if ttl == 0 {
		ttl = DefaultLeaseTTL
	}
	if renew == 0 {
		renew = DefaultLeaseRenew
	}
	if ttl < 0 || renew < 100*time.Millisecond || ttl <= 2*renew {
		return fmt.Errorf("the lease duration (%s) must exceed twice the renewal period (%s), which must be at least 100ms", ttl, renew)
	}
	return nil
}
