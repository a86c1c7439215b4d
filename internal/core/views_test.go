package core

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/core/store/storetest"
)

// views starts Views over h's exporter on clk; tiers come from Update.
func (h *exportHarness) views(t *testing.T, clk Clock) *Views {
	t.Helper()
	h.x.Tiers = nil
	v := NewViews(t.Context(), ViewOptions{
		Exporter: h.x, Store: h.st, Interval: time.Hour, Settle: 2 * time.Second, FirstDelay: 4 * time.Second,
		Clock: clk, Rand: func() float64 { return 0.5 }, Log: slog.New(slog.DiscardHandler),
	})
	t.Cleanup(func() {
		v.Update(nil)
		v.Wait()
	})
	return v
}

// TestViewsExportOnScheduleAndAfterImports: a view's first export comes
// after its jittered first delay, under the tiers of its target; the next
// waits the interval, unless an import announces new entries, which leave
// after the settle time, only those; each outcome is recorded. A target
// that is no view gets no worker, and a view that stops running gets
// nothing more.
func TestViewsExportOnScheduleAndAfterImports(t *testing.T) {
	h := newExportHarness(t)
	clk := newFakeClock()
	v := h.views(t, clk)
	v.Update([]Target{{Instance: "csv", View: true}, {Instance: "bank", Connector: true, DataTiers: []string{TierAccounts}}})
	if got := v.Instances(); len(got) != 1 || got[0] != "csv" {
		t.Fatalf("Instances() = %v, want only the view", got)
	}
	first := clk.next(t)
	if first.d != 2*time.Second {
		t.Fatalf("first export after %v, want half of the 4s first delay", first.d)
	}
	clk.fire(first)
	interval := clk.next(t)
	if interval.d != time.Hour {
		t.Fatalf("next export after %v, want the interval", interval.d)
	}
	days := storetest.Days(0, 25)
	if got, want := h.view.counts(), map[string]int{"fx": days, "price": days, "index": days}; !equalCounts(got, want) {
		t.Fatalf("first export: %v, want %v (no accounts tier)", got, want)
	}
	rec, err := h.st.Status(t.Context(), "csv")
	if err != nil || !rec.LastOK || !rec.NextSync.Equal(clk.Now().Add(time.Hour)) {
		t.Fatalf("recorded %+v, %v", rec, err)
	}
	if next, ok := v.NextRun("csv"); !ok || !next.Equal(clk.Now().Add(time.Hour)) {
		t.Errorf("NextRun = %v, %v", next, ok)
	}

	// Granted accounts and new entries announced: the settle wait, then
	// only what the view has not kept.
	v.Update([]Target{{Instance: "csv", View: true, DataTiers: []string{TierAccounts}}})
	if _, err := h.st.Import(t.Context(), "bank", store.KindSync, storetest.Sync("b1", 25, 5, "w1")); err != nil {
		t.Fatal(err)
	}
	v.Poke()
	settle := clk.next(t)
	if settle.d != 2*time.Second {
		t.Fatalf("after a poke the view waited %v, want the settle time", settle.d)
	}
	clk.fire(settle)
	clk.next(t)
	all := storetest.Days(0, 30)
	if got, want := h.view.counts(), map[string]int{"fx": all, "price": all, "index": all, "tx": 30, "balance": all}; !equalCounts(got, want) {
		t.Fatalf("after the poke: %v, want %v", got, want)
	}

	// No longer a view: no worker, a poke sends nothing.
	before := h.view.counts()
	v.Update([]Target{{Instance: "csv", Connector: true}})
	v.Poke()
	clk.noWait(t)
	if len(v.Instances()) != 0 || !equalCounts(h.view.counts(), before) {
		t.Fatalf("after the view stopped: workers %v, counts %v", v.Instances(), h.view.counts())
	}
	if _, err := v.Tiers(t.Context(), "csv"); !errors.Is(err, ErrNotView) {
		t.Errorf("tiers of a stopped view: %v, want ErrNotView", err)
	}
}

// TestViewsRetryAnUnavailableView: an export the view answers Unavailable
// is tried again after the backoff and then kept; one it refuses with
// another code is recorded as failed and waits for the next run.
func TestViewsRetryAnUnavailableView(t *testing.T) {
	h := newExportHarness(t)
	clk := newFakeClock()
	v := h.views(t, clk)
	h.view.fail = connect.NewError(connect.CodeUnavailable, errors.New("disk full for a moment"))
	v.Update([]Target{{Instance: "csv", View: true}})
	clk.fire(clk.next(t)) // the first delay
	backoff := clk.next(t)
	if backoff.d != DefaultBackoff {
		t.Fatalf("waited %v after Unavailable, want the backoff %v", backoff.d, DefaultBackoff)
	}
	clk.fire(backoff)
	clk.next(t) // the interval
	days := storetest.Days(0, 25)
	if got := h.view.counts(); got["fx"] != days {
		t.Fatalf("after the retry the view has %v", got)
	}
	if rec, _ := h.st.Status(t.Context(), "csv"); !rec.LastOK {
		t.Fatalf("recorded %+v after a successful retry", rec)
	}

	if _, err := h.st.Import(t.Context(), "bank", store.KindSync, storetest.Sync("b1", 30, 1, "w1")); err != nil {
		t.Fatal(err)
	}
	h.view.fail = connect.NewError(connect.CodePermissionDenied, errors.New("the folder refused the write"))
	v.Poke()
	clk.fire(clk.next(t)) // settle
	if w := clk.next(t); w.d != time.Hour {
		t.Fatalf("after a refusal the view waits %v, want the interval (no retry)", w.d)
	}
	rec, _ := h.st.Status(t.Context(), "csv")
	if rec.LastOK || rec.LastError == "" {
		t.Fatalf("a refused export recorded %+v", rec)
	}
}

// TestSchedulerAnnouncesStoredRows: the scheduler calls OnStored after an
// import that stored rows, and not after one that stored nothing new.
func TestSchedulerAnnouncesStoredRows(t *testing.T) {
	st := openStore(t)
	clk := newFakeClock()
	c := newScripted(rates("2026-11-27"), rates("2026-11-27"))
	stored := make(chan struct{}, 4)
	s := schedule(t, clk, c, st, SchedulerOptions{OnStored: func() { stored <- struct{}{} }})
	s.Update([]Target{fx})
	clk.fire(clk.next(t))
	w := clk.next(t)
	if len(stored) != 1 {
		t.Fatalf("after a sync that stored rows: %d announcements, want 1", len(stored))
	}
	clk.fire(w)
	clk.next(t)
	if len(stored) != 1 {
		t.Fatalf("after a sync that stored nothing new: %d announcements, want still 1", len(stored))
	}
}
