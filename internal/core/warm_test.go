package core

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// recordingTokens is a TokenSource that records when each token was asked
// for, on the scheduler's clock.
type recordingTokens struct {
	clk *fakeClock
	mu  sync.Mutex
	at  []time.Time
}

func (r *recordingTokens) Token(_ context.Context, instance string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at = append(r.at, r.clk.Now())
	return "test-token-" + instance, nil
}

func (r *recordingTokens) asked() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.at...)
}

// TestWarmAhead: with a real Caller the scheduler waits until WarmAhead
// before the sync is due, gets the instance's token, waits the rest and
// then calls; the sync itself starts on its due time.
func TestWarmAhead(t *testing.T) {
	_, h := connectorv1connect.NewConnectorServiceHandler(echoConnector{})
	url := serveHostile(t, http.Handler(h))
	st := openStore(t)
	clk := newFakeClock()
	tokens := &recordingTokens{clk: clk}
	caller := &Caller{Tokens: tokens, Resolve: func(string) string { return url }}
	const ahead = 3 * time.Second
	s := schedule(t, clk, caller, st, SchedulerOptions{WarmAhead: ahead, FirstSyncDelay: -1, Jitter: -1})
	s.Update([]Target{fx})

	// The first sync is due at once: no wait before the warm-up, then none
	// before the call.
	clk.fire(clk.next(t))
	lead := clk.next(t)
	due, _ := s.NextSync("fx")
	if lead.d != time.Hour-ahead {
		t.Fatalf("the wait after the first sync is %v, want the interval less %v", lead.d, ahead)
	}
	clk.fire(lead)
	w := clk.next(t)
	if w.d != ahead {
		t.Fatalf("after the warm-up the scheduler waits %v, want %v", w.d, ahead)
	}
	if got := tokens.asked(); len(got) != 3 || !got[2].Equal(due.Add(-ahead)) {
		t.Fatalf("tokens asked at %v, want the third %v before %v", got, ahead, due)
	}
	clk.fire(w)
	clk.next(t) // the next round's wait: the second sync is done
	got := tokens.asked()
	if len(got) != 4 || !got[3].Equal(due) {
		t.Fatalf("tokens asked at %v, want the call's at %v", got, due)
	}
}
