package core

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/core/store"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// openStore opens the store's real SQLite database in a temporary file.
func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "core.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return st
}

// fakeClock lets a test decide when each wait of the scheduler ends: every
// After is reported on waits, and fires when the test calls fire.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits chan clockWait
}

type clockWait struct {
	d  time.Duration
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), waits: make(chan clockWait, 16)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.waits <- clockWait{d: d, ch: ch}
	return ch
}

// next returns the scheduler's next wait, failing after a few seconds.
func (c *fakeClock) next(t *testing.T) clockWait {
	t.Helper()
	select {
	case w := <-c.waits:
		return w
	case <-time.After(5 * time.Second):
		t.Fatal("the scheduler did not wait")
		return clockWait{}
	}
}

// fire advances the clock by the wait and ends it.
func (c *fakeClock) fire(w clockWait) {
	c.mu.Lock()
	c.now = c.now.Add(w.d)
	now := c.now
	c.mu.Unlock()
	w.ch <- now
}

// noWait fails if the scheduler waits (or calls) again within a moment.
func (c *fakeClock) noWait(t *testing.T) {
	t.Helper()
	select {
	case w := <-c.waits:
		t.Fatalf("unexpected wait of %v", w.d)
	case <-time.After(100 * time.Millisecond):
	}
}

// scripted is a Connector that answers from a list of functions, one per
// call, and records the requests.
type scripted struct {
	mu      sync.Mutex
	answers []func(ctx context.Context, req *connectorv1.SyncRequest) (*connectorv1.Delivery, error)
	calls   []*connectorv1.SyncRequest
	called  chan struct{}
}

func newScripted(answers ...func(ctx context.Context, req *connectorv1.SyncRequest) (*connectorv1.Delivery, error)) *scripted {
	return &scripted{answers: answers, called: make(chan struct{}, 16)}
}

func (s *scripted) Sync(ctx context.Context, _ string, req *connectorv1.SyncRequest) (*connectorv1.Delivery, error) {
	s.mu.Lock()
	s.calls = append(s.calls, req)
	n := len(s.calls)
	s.mu.Unlock()
	s.called <- struct{}{}
	if n > len(s.answers) {
		return nil, fmt.Errorf("unexpected call %d", n)
	}
	return s.answers[n-1](ctx, req)
}

func (s *scripted) ImportFile(context.Context, string, *connectorv1.FileHeader, io.Reader) (*connectorv1.Delivery, error) {
	return nil, fmt.Errorf("not scripted")
}

func (s *scripted) requests() []*connectorv1.SyncRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*connectorv1.SyncRequest(nil), s.calls...)
}

// rates answers a delivery of two FX rates for day with watermark day.
func rates(day string) func(context.Context, *connectorv1.SyncRequest) (*connectorv1.Delivery, error) {
	return func(_ context.Context, req *connectorv1.SyncRequest) (*connectorv1.Delivery, error) {
		return &connectorv1.Delivery{
			BatchId:     req.GetBatchId(),
			Institution: &connectorv1.Institution{Id: "nbp", Name: "Narodowy Bank Polski"},
			FxRates: []*connectorv1.FxRate{
				{Date: day, BaseCurrency: "USD", QuoteCurrency: "PLN", Rate: "3.6589"},
				{Date: day, BaseCurrency: "EUR", QuoteCurrency: "PLN", Rate: "4.2301"},
			},
			Watermark: day,
		}, nil
	}
}

// transactions answers one balanced transaction.
func transactions(req *connectorv1.SyncRequest) *connectorv1.Delivery {
	return &connectorv1.Delivery{
		BatchId:     req.GetBatchId(),
		Institution: &connectorv1.Institution{Id: "bank", Name: "Bank"},
		Transactions: []*connectorv1.Transaction{{
			SourceId: "t1", Date: "2026-11-02", Description: "coffee",
			Postings: []*connectorv1.Posting{
				{AccountId: "cash", Amount: "-3.50", Currency: "PLN"},
				{AccountId: "food", Amount: "3.50", Currency: "PLN"},
			},
		}},
		Watermark: "2026-11-02",
	}
}

// schedule runs a scheduler on clk, connector and st until the test ends.
func schedule(t *testing.T, clk *fakeClock, c Connector, st Store, o SchedulerOptions) *Scheduler {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o.Store, o.Connector, o.Clock = st, c, clk
	if o.Rand == nil {
		o.Rand = func() float64 { return 0.5 }
	}
	if o.DefaultInterval == 0 {
		o.DefaultInterval = time.Hour
	}
	if o.WarmAhead == 0 {
		o.WarmAhead = -1 // each wait is the sync's alone; TestWarmAhead warms
	}
	n := 0
	o.NewBatchID = func() string { n++; return fmt.Sprintf("batch-%d", n) }
	s := NewScheduler(ctx, o)
	t.Cleanup(func() {
		cancel()
		// Let a worker blocked on the fake clock see the cancellation.
		s.Wait()
	})
	return s
}

// manualSchedule is the scheduling of the tests that start the whole core:
// no first sync on its own and an hour between syncs, so only what a test
// does makes the core call a plugin.
var manualSchedule = SchedulerOptions{FirstSyncDelay: -1, DefaultInterval: time.Hour}

// apiClient is a controller-runtime client of the API server at cfg with
// the API's types, for the tests to write Plugins as the operator would.
func apiClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	scheme, err := apiconv.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}
