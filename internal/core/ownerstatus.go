package core

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/display"
)

// What the owner API's status reports of each instance (serveStatusAll,
// serveStatus): what the store recorded, with the schedule of the
// scheduler and the views, for every live and every removed instance.

// known is every instance the store or the scheduler knows, sorted.
func (c *Core) known(r *http.Request) ([]string, error) {
	names, err := c.store.Instances(r.Context())
	if err != nil {
		return nil, err
	}
	names = append(names, c.sched.Instances()...)
	names = append(names, c.views.Instances()...)
	slices.Sort(names)
	return slices.Compact(names), nil
}

// status combines what the store recorded with the schedule.
func (c *Core) status(r *http.Request, name string) (ownerapi.InstanceStatus, error) {
	st, err := c.store.Status(r.Context(), name)
	if err != nil && !errors.Is(err, store.ErrUnknownInstance) {
		return ownerapi.InstanceStatus{}, err
	}
	out := ownerStatus(name, st)
	next, ok := c.sched.NextSync(name)
	if vnext, vok := c.views.NextRun(name); vok {
		out.View = true
		if !ok || vnext.Before(next) {
			next, ok = vnext, true
		}
	}
	if ok {
		out.Scheduled = true
		if !next.IsZero() {
			n := next.UTC()
			out.NextSync = &n
		}
	}
	if d, ok := c.sched.Interval(name); ok {
		out.IntervalSeconds = int64(d / time.Second)
	} else if out.View {
		out.IntervalSeconds = int64(c.views.Interval() / time.Second)
	}
	if !ok && c.servedElsewhere(name) {
		return c.statusElsewhere(r, name, st, out)
	}
	if out.View {
		lag, err := c.viewLag(r.Context(), name)
		if err != nil {
			return ownerapi.InstanceStatus{}, err
		}
		out.Lag = lag
	}
	return out, nil
}

// servedElsewhere tells a running instance another replica serves.
func (c *Core) servedElsewhere(name string) bool {
	if c.leases == nil || c.leases.Holds(name) {
		return false
	}
	_, running := c.leases.Running(name)
	return running
}

// statusElsewhere is the status of an instance another replica serves: its
// schedule as the store recorded it (the holder records each sync's next),
// its interval and, for a view, its lag under the grant the watch reports.
func (c *Core) statusElsewhere(r *http.Request, name string, rec store.InstanceRecord, out ownerapi.InstanceStatus) (ownerapi.InstanceStatus, error) {
	t, _ := c.leases.Running(name)
	out.Scheduled, out.View = true, t.View
	if !rec.NextSync.IsZero() {
		n := rec.NextSync.UTC()
		out.NextSync = &n
	}
	switch {
	case t.Connector:
		out.IntervalSeconds = int64(c.sched.interval(name) / time.Second)
	case t.View:
		out.IntervalSeconds = int64(c.views.Interval() / time.Second)
	}
	if lr, ok := c.store.(lagReader); ok && t.View {
		n, err := lr.ViewLag(r.Context(), name, ViewKinds(t.DataTiers))
		if err != nil {
			return ownerapi.InstanceStatus{}, err
		}
		out.Lag = &n
	}
	return out, nil
}

// lagReader is the part of the store that counts a view's lag;
// *store.Store is one.
type lagReader interface {
	ViewLag(ctx context.Context, view string, kinds []store.EntryKind) (int64, error)
}

// viewLag counts the entries a running view may be sent and has not been:
// of the kinds its grant's tiers allow now. nil when the store cannot count
// them or the view stopped meanwhile.
func (c *Core) viewLag(ctx context.Context, name string) (*int64, error) {
	lr, ok := c.store.(lagReader)
	if !ok {
		return nil, nil
	}
	tiers, terr := c.views.Tiers(ctx, name)
	if terr != nil {
		// The view stopped since NextRun answered: no lag to tell.
		return nil, nil
	}
	n, err := lr.ViewLag(ctx, name, ViewKinds(tiers))
	if err != nil {
		return nil, err
	}
	return &n, nil
}

// ownerStatus turns what the store holds of instance name into the owner
// API's status, escaping the plugin-written text; an instance the store
// does not know yet has an empty record, so an empty status. The caller
// adds the schedule.
func ownerStatus(name string, rec store.InstanceRecord) ownerapi.InstanceStatus {
	// The last error and the watermark are plugin-written text; a record
	// stored before OF-17 may hold them raw, so they are escaped here too.
	out := ownerapi.InstanceStatus{Plugin: name, Instance: name, LastOK: rec.LastOK, LastError: display.Message(rec.LastError), Watermark: display.Text(rec.Watermark)}
	if plugin, _, ok := store.SplitKey(name); ok {
		out.Plugin = plugin
	}
	out.UID = rec.UID
	if !rec.RemovedAt.IsZero() {
		t := rec.RemovedAt.UTC()
		out.Removed, out.RemovedAt = true, &t
	}
	if !rec.LastSync.IsZero() {
		t := rec.LastSync.UTC()
		out.LastSync = &t
	}
	if !rec.NextSync.IsZero() {
		t := rec.NextSync.UTC()
		out.NextSync = &t
	}
	r := rec.Rows
	out.Rows = ownerapi.RowCounts{
		Batches: r.Batches, Transactions: r.Transactions, Postings: r.Postings, Balances: r.Balances,
		Prices: r.Prices, FxRates: r.FxRates, IndexReadings: r.IndexReadings, Problems: r.Problems,
	}
	out.RowsTotal = r.Transactions + r.Postings + r.Balances + r.Prices + r.FxRates + r.IndexReadings + r.Problems
	return out
}

// removedStatuses are the removed instances' statuses, sorted by name and
// removal.
func (c *Core) removedStatuses(r *http.Request) ([]ownerapi.InstanceStatus, error) {
	removed, err := c.store.RemovedInstances(r.Context())
	if err != nil {
		return nil, err
	}
	out := make([]ownerapi.InstanceStatus, 0, len(removed))
	for _, ri := range removed {
		st, err := c.store.Status(r.Context(), ri.Key)
		if errors.Is(err, store.ErrUnknownInstance) {
			continue // purged meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, ownerStatus(ri.Key, st))
	}
	return out, nil
}
