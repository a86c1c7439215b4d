package core

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/plugins"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

var fx = Target{Instance: "fx", Connector: true}

// TestSyncSchedule: the first sync comes after a jittered delay, with an
// empty watermark; the delivery is stored; the next comes an interval plus
// jitter later with the stored watermark; the same rows again store nothing
// twice; each outcome is recorded.
func TestSyncSchedule(t *testing.T) {
	st := openStore(t)
	clk := newFakeClock()
	c := newScripted(rates("2026-11-27"), rates("2026-11-27"))
	s := schedule(t, clk, c, st, SchedulerOptions{DefaultInterval: time.Hour, Intervals: map[string]time.Duration{"other": time.Minute}})
	s.Update([]Target{fx, {Instance: "view", Connector: false}})
	if got := s.Instances(); len(got) != 1 || got[0] != "fx" {
		t.Fatalf("Instances() = %v, want only the connector", got)
	}

	first := clk.next(t)
	if first.d != DefaultFirstSyncDelay/2 {
		t.Fatalf("first sync after %v, want half of %v (Rand = 0.5)", first.d, DefaultFirstSyncDelay)
	}
	clk.fire(first)
	second := clk.next(t) // the wait after the first sync
	if want := time.Hour + time.Hour/20; second.d != want {
		t.Fatalf("next sync after %v, want interval+jitter %v", second.d, want)
	}
	status, err := st.Status(t.Context(), "fx")
	if err != nil {
		t.Fatal(err)
	}
	if !status.LastOK || status.Rows.FxRates != 2 || status.Watermark != "2026-11-27" {
		t.Fatalf("after the first sync: %+v", status)
	}
	if next, _ := s.NextSync("fx"); !next.Equal(clk.Now().Add(second.d)) {
		t.Errorf("NextSync = %v, want %v", next, clk.Now().Add(second.d))
	}
	clk.fire(second)
	clk.next(t)
	reqs := c.requests()
	if len(reqs) != 2 || reqs[0].GetWatermark() != "" || reqs[1].GetWatermark() != "2026-11-27" {
		t.Fatalf("requests %v: want the empty watermark, then the stored one", reqs)
	}
	if reqs[0].GetBatchId() == reqs[1].GetBatchId() {
		t.Errorf("two batches share the ID %q", reqs[0].GetBatchId())
	}
	status, err = st.Status(t.Context(), "fx")
	if err != nil {
		t.Fatal(err)
	}
	if status.Rows.FxRates != 2 || status.Rows.Batches != 2 {
		t.Errorf("after the same rates again: %+v rows, want 2 rates in 2 batches", status.Rows)
	}
}

// TestSyncRetries: Unavailable and DeadlineExceeded are retried with
// doubling waits and the same batch ID; InvalidArgument and
// FailedPrecondition are not; the error is recorded.
func TestSyncRetries(t *testing.T) {
	unavailable := func(context.Context, *connectorv1.SyncRequest) (*connectorv1.Delivery, error) {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("NBP is down"))
	}
	deadline := func(context.Context, *connectorv1.SyncRequest) (*connectorv1.Delivery, error) {
		return nil, connect.NewError(connect.CodeDeadlineExceeded, errors.New("slow"))
	}
	t.Run("retried until it answers", func(t *testing.T) {
		st := openStore(t)
		clk := newFakeClock()
		c := newScripted(unavailable, deadline, rates("2026-11-27"))
		s := schedule(t, clk, c, st, SchedulerOptions{})
		s.Update([]Target{fx})
		clk.fire(clk.next(t))
		for _, want := range []time.Duration{DefaultBackoff, 2 * DefaultBackoff} {
			w := clk.next(t)
			if w.d != want {
				t.Fatalf("backoff %v, want %v", w.d, want)
			}
			clk.fire(w)
		}
		clk.next(t) // the next scheduled sync
		reqs := c.requests()
		if len(reqs) != 3 || reqs[0].GetBatchId() != reqs[2].GetBatchId() || reqs[1].GetBatchId() != reqs[0].GetBatchId() {
			t.Fatalf("requests %v: want three calls of one batch", reqs)
		}
		if status, _ := st.Status(t.Context(), "fx"); !status.LastOK || status.Rows.FxRates != 2 {
			t.Fatalf("status %+v", status)
		}
	})
	t.Run("gives up after MaxAttempts", func(t *testing.T) {
		st := openStore(t)
		clk := newFakeClock()
		c := newScripted(unavailable, unavailable, unavailable)
		s := schedule(t, clk, c, st, SchedulerOptions{MaxAttempts: 3, Backoff: time.Second, MaxBackoff: 1500 * time.Millisecond})
		s.Update([]Target{fx})
		clk.fire(clk.next(t))
		for _, want := range []time.Duration{time.Second, 1500 * time.Millisecond} {
			w := clk.next(t)
			if w.d != want {
				t.Fatalf("backoff %v, want %v (capped)", w.d, want)
			}
			clk.fire(w)
		}
		clk.next(t)
		status, err := st.Status(t.Context(), "fx")
		if err != nil {
			t.Fatal(err)
		}
		if status.LastOK || !strings.Contains(status.LastError, "after 3 attempts") || !strings.Contains(status.LastError, "NBP is down") {
			t.Fatalf("status %+v", status)
		}
	})
	for _, code := range []connect.Code{connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeUnauthenticated} {
		t.Run("no retry on "+code.String(), func(t *testing.T) {
			st := openStore(t)
			clk := newFakeClock()
			c := newScripted(func(context.Context, *connectorv1.SyncRequest) (*connectorv1.Delivery, error) {
				return nil, connect.NewError(code, errors.New("cannot read it"))
			})
			s := schedule(t, clk, c, st, SchedulerOptions{})
			s.Update([]Target{fx})
			clk.fire(clk.next(t))
			if w := clk.next(t); w.d < time.Hour {
				t.Fatalf("waited %v after %v: a retry", w.d, code)
			}
			if n := len(c.requests()); n != 1 {
				t.Fatalf("%d calls, want 1", n)
			}
			if status, _ := st.Status(t.Context(), "fx"); status.LastOK || !strings.Contains(status.LastError, "cannot read it") {
				t.Fatalf("status %+v", status)
			}
		})
	}
}

// TestSyncRefusals: a delivery of another batch, one outside the data
// tiers and one the store's rules refuse store nothing, are recorded and
// not retried.
func TestSyncRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		target Target
		answer func(context.Context, *connectorv1.SyncRequest) (*connectorv1.Delivery, error)
		want   string
	}{
		"another batch ID": {fx, func(ctx context.Context, req *connectorv1.SyncRequest) (*connectorv1.Delivery, error) {
			d, _ := rates("2026-11-27")(ctx, req)
			d.BatchId = "not-mine"
			return d, nil
		}, "batch_id differs"},
		"transactions without the accounts tier": {fx, func(_ context.Context, req *connectorv1.SyncRequest) (*connectorv1.Delivery, error) {
			return transactions(req), nil
		}, `needs the data tier "accounts"`},
		"a rule of the store": {fx, func(ctx context.Context, req *connectorv1.SyncRequest) (*connectorv1.Delivery, error) {
			d, _ := rates("2026-11-27")(ctx, req)
			d.FxRates = append(d.FxRates, &connectorv1.FxRate{Date: "2026-11-27", BaseCurrency: "CHF", QuoteCurrency: "PLN", Rate: "1e3"})
			return d, nil
		}, "delivery refused"},
	} {
		t.Run(name, func(t *testing.T) {
			st := openStore(t)
			clk := newFakeClock()
			c := newScripted(tc.answer)
			s := schedule(t, clk, c, st, SchedulerOptions{})
			s.Update([]Target{tc.target})
			clk.fire(clk.next(t))
			if w := clk.next(t); w.d < time.Hour {
				t.Fatalf("waited %v: a retry", w.d)
			}
			status, err := st.Status(t.Context(), "fx")
			if err != nil {
				t.Fatal(err)
			}
			if status.LastOK || !strings.Contains(status.LastError, tc.want) {
				t.Fatalf("last error %q, want it to contain %q", status.LastError, tc.want)
			}
			if status.Rows != (store.RowCounts{}) || status.Watermark != "" {
				t.Fatalf("stored %+v, watermark %q: want nothing", status.Rows, status.Watermark)
			}
		})
	}
	t.Run("transactions with the accounts tier", func(t *testing.T) {
		st := openStore(t)
		clk := newFakeClock()
		c := newScripted(func(_ context.Context, req *connectorv1.SyncRequest) (*connectorv1.Delivery, error) {
			return transactions(req), nil
		})
		s := schedule(t, clk, c, st, SchedulerOptions{})
		s.Update([]Target{{Instance: "fx", Connector: true, DataTiers: []string{TierAccounts}}})
		clk.fire(clk.next(t))
		clk.next(t)
		if status, _ := st.Status(t.Context(), "fx"); !status.LastOK || status.Rows.Transactions != 1 {
			t.Fatalf("status %+v", status)
		}
	})
}

// failingImport is the real store whose Import fails, without storing,
// the first n times: the database unavailable mid-batch.
type failingImport struct {
	*store.Store
	n int
}

func (f *failingImport) Import(ctx context.Context, instance string, kind store.Kind, d *connectorv1.Delivery) (store.ImportResult, error) {
	if f.n > 0 {
		f.n--
		return store.ImportResult{}, errors.New("database is locked")
	}
	return f.Store.Import(ctx, instance, kind, d)
}

// TestSyncDatabaseUnavailable: a failed import loses nothing: the batch is
// called again with the same ID and the old watermark, and stored.
func TestSyncDatabaseUnavailable(t *testing.T) {
	st := &failingImport{Store: openStore(t), n: 1}
	clk := newFakeClock()
	c := newScripted(rates("2026-11-27"), rates("2026-11-27"))
	s := schedule(t, clk, c, st, SchedulerOptions{})
	s.Update([]Target{fx})
	clk.fire(clk.next(t))
	if w := clk.next(t); w.d != DefaultBackoff {
		t.Fatalf("waited %v, want a retry after %v", w.d, DefaultBackoff)
	} else {
		clk.fire(w)
	}
	clk.next(t)
	reqs := c.requests()
	if len(reqs) != 2 || reqs[1].GetBatchId() != reqs[0].GetBatchId() || reqs[1].GetWatermark() != "" {
		t.Fatalf("requests %v: want the same batch from the old watermark", reqs)
	}
	if status, _ := st.Status(t.Context(), "fx"); !status.LastOK || status.Rows.FxRates != 2 || status.Watermark != "2026-11-27" {
		t.Fatalf("status %+v", status)
	}
}

// TestRevokeStopsCalls: an instance leaving the running set has its worker
// cancelled: a call in flight is abandoned and nothing more is called.
func TestRevokeStopsCalls(t *testing.T) {
	st := openStore(t)
	clk := newFakeClock()
	inFlight := make(chan struct{})
	c := newScripted(func(ctx context.Context, _ *connectorv1.SyncRequest) (*connectorv1.Delivery, error) {
		close(inFlight)
		<-ctx.Done()
		return nil, connect.NewError(connect.CodeUnavailable, ctx.Err())
	})
	stopped := make(chan string, 1)
	s := schedule(t, clk, c, st, SchedulerOptions{OnStop: func(i string) { stopped <- i }})
	s.Update([]Target{fx})
	clk.fire(clk.next(t))
	<-inFlight
	s.Update(nil)
	if got := <-stopped; got != "fx" {
		t.Fatalf("stopped %q", got)
	}
	clk.noWait(t)
	if n := len(c.requests()); n != 1 {
		t.Fatalf("%d calls after the revocation, want the one in flight", n)
	}
	if len(s.Instances()) != 0 {
		t.Fatalf("still scheduled: %v", s.Instances())
	}
	if _, err := s.ImportFile(t.Context(), "fx", "a.csv", "", false, strings.NewReader("x")); !errors.Is(err, ErrNotConnector) {
		t.Fatalf("ImportFile after the revocation: %v", err)
	}
}

// overlapConnector records how many calls to one instance run at once.
type overlapConnector struct {
	*scripted
	mu           sync.Mutex
	inside, most int
}

func (o *overlapConnector) enter() func() {
	o.mu.Lock()
	o.inside++
	o.most = max(o.most, o.inside)
	o.mu.Unlock()
	return func() { o.mu.Lock(); o.inside--; o.mu.Unlock() }
}

func (o *overlapConnector) Sync(ctx context.Context, i string, req *connectorv1.SyncRequest) (*connectorv1.Delivery, error) {
	defer o.enter()()
	return o.scripted.Sync(ctx, i, req)
}

func (o *overlapConnector) ImportFile(_ context.Context, _ string, h *connectorv1.FileHeader, _ io.Reader) (*connectorv1.Delivery, error) {
	defer o.enter()()
	return &connectorv1.Delivery{BatchId: h.GetBatchId(), Institution: &connectorv1.Institution{Id: "x", Name: "X"}}, nil
}

// TestNoOverlap: an owner's ImportFile waits for the instance's Sync in
// flight; the two never run at once.
func TestNoOverlap(t *testing.T) {
	st := openStore(t)
	clk := newFakeClock()
	release := make(chan struct{})
	c := &overlapConnector{scripted: newScripted(func(ctx context.Context, req *connectorv1.SyncRequest) (*connectorv1.Delivery, error) {
		<-release
		return rates("2026-11-27")(ctx, req)
	})}
	s := schedule(t, clk, c, st, SchedulerOptions{})
	s.Update([]Target{fx})
	clk.fire(clk.next(t))
	<-c.called // the Sync is in flight
	imported := make(chan error, 1)
	go func() {
		_, err := s.ImportFile(t.Context(), "fx", "a.csv", "text/csv", false, strings.NewReader("x"))
		imported <- err
	}()
	select {
	case err := <-imported:
		t.Fatalf("ImportFile finished during the Sync: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-imported; err != nil {
		t.Fatal(err)
	}
	if c.most != 1 {
		t.Fatalf("%d calls at once, want 1", c.most)
	}
}

// TestSyncKeepsRecordedSchedule: a worker that starts again (a restarted
// core) waits for the next sync it recorded, at most one interval.
func TestSyncKeepsRecordedSchedule(t *testing.T) {
	for name, tc := range map[string]struct {
		next, want time.Duration
	}{
		"recorded in 30m":       {30 * time.Minute, 30 * time.Minute},
		"recorded beyond reach": {5 * time.Hour, time.Hour},
		"recorded in the past":  {-time.Minute, DefaultFirstSyncDelay / 2},
	} {
		t.Run(name, func(t *testing.T) {
			st := openStore(t)
			clk := newFakeClock()
			if err := st.RecordSync(t.Context(), "fx", store.SyncRecord{At: clk.Now().Add(-time.Hour), OK: true, Next: clk.Now().Add(tc.next)}); err != nil {
				t.Fatal(err)
			}
			s := schedule(t, clk, newScripted(), st, SchedulerOptions{})
			s.Update([]Target{fx})
			if w := clk.next(t); w.d != tc.want {
				t.Fatalf("first sync after %v, want %v", w.d, tc.want)
			}
		})
	}
}

// TestSyncErrorIsEscaped: a connector's error message is stored and
// reported as the last error only escaped (OF-17), so cursor-moving
// escapes and bidi controls reach no terminal or page.
func TestSyncErrorIsEscaped(t *testing.T) {
	st := openStore(t)
	clk := newFakeClock()
	hostile := "bad\x1b7\x1b[1A\x1b[2K\x1b8 \u202egnirts\u202c\u009b2K\r\nforged"
	c := newScripted(func(context.Context, *connectorv1.SyncRequest) (*connectorv1.Delivery, error) {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New(hostile))
	})
	s := schedule(t, clk, c, st, SchedulerOptions{})
	s.Update([]Target{fx})
	clk.fire(clk.next(t))
	clk.next(t)
	status, err := st.Status(t.Context(), "fx")
	if err != nil {
		t.Fatal(err)
	}
	want := `bad\x1b7\x1b[1A\x1b[2K\x1b8 \u202egnirts\u202c\x9b2K\x0d\x0aforged`
	for name, got := range map[string]string{"stored": status.LastError, "owner API": ownerStatus("fx", status).LastError} {
		if !strings.Contains(got, want) {
			t.Errorf("%s last error %q, want it to hold %q", name, got, want)
		}
		if plugins.CheckText(got, 0) != nil {
			t.Errorf("%s last error %q holds unsafe text", name, got)
		}
	}
}
