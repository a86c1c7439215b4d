package core

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/core/store"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// TestCallerBoundsAnswers: every way a plugin can answer more than the core
// reads is refused with ErrAnswerTooLarge (compressed, with
// ErrCompressedAnswer), before the core reads it all, and is not retried.
func TestCallerBoundsAnswers(t *testing.T) {
	const limit = 1 << 20
	var sent atomic.Int64
	for name, tc := range map[string]struct {
		url    string
		sync   bool
		budget int64
		want   error
	}{
		"Sync answers 64 MiB of junk": {serveHostile(t, junkAnswer(64<<20, &sent)), true, 0, ErrAnswerTooLarge},
		"Sync answers a gzip bomb":    {serveHostile(t, gzipBomb(t, 64<<20)), true, 0, ErrCompressedAnswer},
		"Sync answers empty transactions that decode to more than the memory bound": {
			serveHostile(t, fixedAnswer(emptyTransactions("b1", limit/2-64))), true, 8 << 20, ErrAnswerTooLarge},
		"ImportFile announces a 4 GiB message": {serveHostile(t, hugeEnvelope(0xfffffff0)), false, 0, ErrAnswerTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			c := &Caller{Tokens: testTokens{}, Resolve: func(string) string { return tc.url }, MaxAnswerBytes: limit, MaxAnswerMemory: tc.budget}
			var err error
			if tc.sync {
				_, err = c.Sync(t.Context(), "evil", &connectorv1.SyncRequest{BatchId: "b1"})
			} else {
				_, err = c.ImportFile(t.Context(), "evil", &connectorv1.FileHeader{BatchId: "b1"}, strings.NewReader("x"))
			}
			if err == nil {
				t.Fatal("the answer was accepted")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
			if retryable(err) {
				t.Errorf("retried: %v", err)
			}
			t.Log(err)
		})
	}
	if n := sent.Load(); n > 8<<20 {
		t.Errorf("the core read %d bytes of a junk answer with a limit of %d", n, limit)
	}

	// Within the bounds, an answer is decoded as before.
	c := &Caller{Tokens: testTokens{}, Resolve: func(string) string {
		return serveHostile(t, fixedAnswer(emptyTransactions("b2", 1000)))
	}, MaxAnswerBytes: limit}
	d, err := c.Sync(t.Context(), "fx", &connectorv1.SyncRequest{BatchId: "b2"})
	if err != nil || len(d.GetTransactions()) != 1000 {
		t.Fatalf("a small answer: %v", err)
	}
}

// longError is a connector whose every error message is 1 MiB long.
type longError struct {
	connectorv1connect.UnimplementedConnectorServiceHandler
}

func (longError) Sync(context.Context, *connect.Request[connectorv1.SyncRequest]) (*connect.Response[connectorv1.SyncResponse], error) {
	return nil, connect.NewError(connect.CodeUnavailable, errors.New(strings.Repeat("é", 1<<19)))
}

// TestCallerBoundsErrorText: a plugin's error message reaches the core's
// record cut to maxPluginErrorText, with its code (and so its retry) kept.
func TestCallerBoundsErrorText(t *testing.T) {
	_, h := connectorv1connect.NewConnectorServiceHandler(longError{})
	c := &Caller{Tokens: testTokens{}, Resolve: func(string) string { return serveHostile(t, h) }}
	_, err := c.Sync(t.Context(), "fx", &connectorv1.SyncRequest{BatchId: "b1"})
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("%v, want Unavailable", err)
	}
	if n := len(err.Error()); n > maxPluginErrorText+64 {
		t.Fatalf("error text of %d bytes", n)
	}
}

// TestSyncAnswerTooLarge: a Sync answer over the bound is recorded as the
// sync's error, naming the bound; nothing is stored; the batch is not
// retried; the next scheduled Sync is made and stores what it answers.
func TestSyncAnswerTooLarge(t *testing.T) {
	const limit = 1 << 20
	var calls atomic.Int32
	junk := junkAnswer(32<<20, nil)
	_, good := connectorv1connect.NewConnectorServiceHandler(echoConnector{})
	url := serveHostile(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			junk.ServeHTTP(w, r)
			return
		}
		good.ServeHTTP(w, r)
	}))
	st := openStore(t)
	clk := newFakeClock()
	caller := &Caller{Tokens: testTokens{}, Resolve: func(string) string { return url }, MaxAnswerBytes: limit}
	s := schedule(t, clk, caller, st, SchedulerOptions{})
	s.Update([]Target{fx})
	clk.fire(clk.next(t))
	next := clk.next(t)
	if next.d < time.Hour {
		t.Fatalf("waited %v: a retry", next.d)
	}
	status, err := st.Status(t.Context(), "fx")
	if err != nil {
		t.Fatal(err)
	}
	if status.LastOK || !strings.Contains(status.LastError, "larger than 1048576 bytes") || status.NextSync.IsZero() {
		t.Fatalf("status %+v, want the bound named and a next sync", status)
	}
	if status.Rows != (store.RowCounts{}) {
		t.Fatalf("stored %+v", status.Rows)
	}
	clk.fire(next)
	clk.next(t)
	status, _ = st.Status(t.Context(), "fx")
	if calls.Load() != 2 || !status.LastOK || status.Rows.FxRates != 2 {
		t.Fatalf("after the next sync: %d calls, %+v", calls.Load(), status)
	}
}

// TestAnswerBoundsFitOrdinaryDeliveries: an answer of ordinary transactions
// (two postings, a description) as large as DefaultMaxAnswerBytes allows is
// within DefaultMaxAnswerMemory, so the bounds refuse only hostile shapes.
func TestAnswerBoundsFitOrdinaryDeliveries(t *testing.T) {
	raw := ordinaryAnswer("b1", DefaultMaxAnswerBytes)
	cost, err := decodedCost(raw, (&connectorv1.SyncResponse{}).ProtoReflect().Descriptor(), math.MaxInt64, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > DefaultMaxAnswerBytes {
		t.Fatalf("the answer is %d bytes, over the bound", len(raw))
	}
	t.Logf("%d bytes encoded, estimated %d bytes decoded", len(raw), cost)
	if cost+cost/8 > DefaultMaxAnswerMemory {
		t.Fatalf("an ordinary answer of %d bytes is estimated at %d bytes decoded, over the bound %d", len(raw), cost, DefaultMaxAnswerMemory)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var out connectorv1.SyncResponse
	if err := (boundedCodec{budget: DefaultMaxAnswerMemory}).Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	// The estimate with its eighth covers what decoding allocates (about 6%
	// more than the bare estimate); the race detector's build allocates
	// some more, hence a quarter here.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(cost+cost/4) {
		t.Errorf("decoding allocated %d bytes, far more than the estimate %d", alloc, cost)
	}
}

// TestOwnerImportRefusesLargeAnswer: the owner API's import goes through
// the same bounds: an ImportFile answer announcing 4 GiB is answered 502,
// named, and nothing is stored.
func TestOwnerImportRefusesLargeAnswer(t *testing.T) {
	url := serveHostile(t, hugeEnvelope(0xfffffff0))
	st := openStore(t)
	caller := &Caller{Tokens: testTokens{}, Resolve: func(string) string { return url }}
	s := schedule(t, newFakeClock(), caller, st, SchedulerOptions{})
	s.Update([]Target{accountsFx})
	// The import's own path: the owner's authentication in front of it is
	// tested in TestOwnerAPIRequiresOwnerToken.
	owner := httptest.NewServer((&Core{store: st, sched: s}).ownerRoutes())
	t.Cleanup(owner.Close)
	resp, err := http.Post(owner.URL+ownerapi.PathPluginPrefix+"fx/import", "text/csv", strings.NewReader("a;b\n"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "too large") {
		t.Fatalf("%d %s, want 502 naming the bound", resp.StatusCode, body)
	}
	noRows(t, st)
}
