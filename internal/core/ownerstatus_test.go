package core

import (
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/core/store/storetest"
)

// TestOwnerStatusIntervalAndLag: the owner API's status of a called
// connector says its sync interval; of a running view, its interval and its
// lag, the entries of the kinds its tiers allow that it was not sent: all
// of them before its first export, none after it. `openfief status` judges
// both.
func TestOwnerStatusIntervalAndLag(t *testing.T) {
	h := newExportHarness(t)
	viewClock := newFakeClock()
	v := h.views(t, viewClock)
	s := NewScheduler(t.Context(), SchedulerOptions{
		Store: h.st, Intervals: map[string]time.Duration{"bank": 20 * time.Minute},
		Clock: newFakeClock(), Rand: func() float64 { return 0.5 }, Log: slog.New(slog.DiscardHandler),
	})
	t.Cleanup(func() {
		s.Update(nil)
		s.Wait()
	})
	s.Update([]Target{{Instance: "bank", Connector: true}})
	v.Update([]Target{{Instance: "csv", View: true}})
	c := &Core{store: h.st, sched: s, views: v}
	r := httptest.NewRequestWithContext(t.Context(), "GET", "/", nil)

	bank, err := c.status(r, "bank")
	if err != nil || !bank.Scheduled || bank.View || bank.IntervalSeconds != 20*60 || bank.Lag != nil {
		t.Errorf("the connector's status: %+v, %v; want scheduled every 1200s, no lag", bank, err)
	}
	// Without the accounts tier the view may be sent rates, prices and
	// index readings: one of each per day of the 25 transactions.
	want := int64(3 * storetest.Days(0, 25))
	csv, err := c.status(r, "csv")
	if err != nil || !csv.View || csv.IntervalSeconds != 3600 || csv.Lag == nil || *csv.Lag != want {
		t.Fatalf("the view's status before its first export: %+v (lag %v), %v; want every 3600s, lag %d", csv, csv.Lag, err, want)
	}
	viewClock.fire(viewClock.next(t))
	viewClock.next(t) // the export ran and the view waits again
	if csv, err = c.status(r, "csv"); err != nil || csv.Lag == nil || *csv.Lag != 0 {
		t.Errorf("the view's lag after its export: %v, %v; want 0", csv.Lag, err)
	}
}
