package core

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/core/store/storetest"
)

// heldTransport holds the first request it carries until the test releases
// it or the request's context ends, as a slow network would, then carries
// it as http.DefaultTransport does (which sends nothing for a request whose
// context has ended).
type heldTransport struct {
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func newHeldTransport() *heldTransport {
	return &heldTransport{entered: make(chan struct{}, 1), release: make(chan struct{})}
}

func (h *heldTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	first := false
	h.once.Do(func() { first = true })
	if first {
		h.entered <- struct{}{}
		select {
		case <-h.release:
		case <-r.Context().Done():
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// hookedPages is a ViewStore that runs after once, after the first page
// it read.
type hookedPages struct {
	ViewStore
	once  sync.Once
	after func()
}

func (s *hookedPages) ReadPage(ctx context.Context, view string, kinds []store.EntryKind, b store.PageBounds) (store.Page, error) {
	p, err := s.ViewStore.ReadPage(ctx, view, kinds, b)
	s.once.Do(s.after)
	return p, err
}

// TestTierNarrowedDuringExport: a view's grant loses the accounts tier (or
// the view stops running) after a page of account data was read under it:
// while the page is being sent (the call held on its way out) or before
// the send began (the narrowing applied right after the read). Once
// Views.Update has returned, no byte of that page reaches the view; the run
// starts again under the narrowed grant and sends the public data alone.
func TestTierNarrowedDuringExport(t *testing.T) {
	accounts := []Target{{Instance: "csv", View: true, DataTiers: []string{TierAccounts}}}
	narrowed := []Target{{Instance: "csv", View: true}}
	for name, tc := range map[string]struct {
		after      []Target
		duringRead bool
		wantPublic bool
	}{
		"narrowed while sending":  {after: narrowed, wantPublic: true},
		"narrowed after the read": {after: narrowed, duringRead: true, wantPublic: true},
		"revoked while sending":   {after: nil},
	} {
		t.Run(name, func(t *testing.T) {
			h := newExportHarness(t)
			h.x.PageEntries = DefaultExportPageEntries // one page holds all
			ht := newHeldTransport()
			if tc.duringRead {
				close(ht.release)
			}
			inner := h.x.Caller
			h.x.Caller = &Caller{Tokens: inner.Tokens, Resolve: inner.Resolve, HTTP: &http.Client{Transport: ht}}
			clk := newFakeClock()
			v := h.views(t, clk)
			applied := make(chan struct{})
			if tc.duringRead {
				h.x.Store = &hookedPages{ViewStore: h.st, after: func() {
					v.Update(tc.after)
					close(applied)
				}}
			}
			v.Update(accounts)
			clk.fire(clk.next(t)) // the first delay: the run starts
			if !tc.duringRead {
				select {
				case <-ht.entered:
				case <-time.After(5 * time.Second):
					t.Fatal("the page was not sent")
				}
				v.Update(tc.after)
				close(applied)
				close(ht.release)
			}
			<-applied
			if tc.after != nil {
				clk.next(t) // the run ended: the interval
			} else {
				v.Wait()
			}
			got := h.view.counts()
			if got["tx"] != 0 || got["balance"] != 0 {
				t.Fatalf("after the narrowing was applied the view got %d transactions and %d balances", got["tx"], got["balance"])
			}
			days := storetest.Days(0, 25)
			if tc.wantPublic && (got["fx"] != days || got["price"] != days || got["index"] != days) {
				t.Errorf("under the narrowed grant the view has %v, want the public data", got)
			}
			if places, _ := h.st.ViewPlaces(t.Context(), "csv"); places[store.KindTransactions] != 0 || places[store.KindBalanceAssertions] != 0 {
				t.Errorf("the account data's places moved: %v", places)
			}
		})
	}
}
