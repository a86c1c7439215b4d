package core

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/core/store/storetest"
	viewv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1/viewv1connect"
)

// recordingView is a ViewService on a real loopback server that keeps the
// entries of every page it accepts and the token each call carried; fail,
// when set, answers the next call with it instead.
type recordingView struct {
	mu      sync.Mutex
	entries []*viewv1.Entry
	tokens  []string
	tiers   [][]string
	fail    error
}

func (v *recordingView) Export(_ context.Context, r *connect.Request[viewv1.ExportRequest]) (*connect.Response[viewv1.ExportResponse], error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.tokens = append(v.tokens, r.Header().Get("Authorization"))
	if err := v.fail; err != nil {
		v.fail = nil
		return nil, err
	}
	v.entries = append(v.entries, r.Msg.GetEntries()...)
	v.tiers = append(v.tiers, r.Msg.GetDataTiers())
	return connect.NewResponse(&viewv1.ExportResponse{}), nil
}

// counts are the entries the view kept, by kind.
func (v *recordingView) counts() map[string]int {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string]int{}
	for _, e := range v.entries {
		switch e.GetEntry().(type) {
		case *viewv1.Entry_FxRate:
			out["fx"]++
		case *viewv1.Entry_Price:
			out["price"]++
		case *viewv1.Entry_IndexReading:
			out["index"]++
		case *viewv1.Entry_Transaction:
			out["tx"]++
		case *viewv1.Entry_BalanceAssertion:
			out["balance"]++
		}
	}
	return out
}

// exportHarness is a store with 25 transactions of nbp-like data (3 days
// of everything else) imported by instance "bank", and a view "csv" served
// on loopback whose tiers the test sets.
type exportHarness struct {
	st    *store.Store
	view  *recordingView
	x     *Exporter
	tiers func() []string
}

func newExportHarness(t *testing.T) *exportHarness {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "core.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.Import(t.Context(), "bank", store.KindSync, storetest.Sync("b0", 0, 25, "w0")); err != nil {
		t.Fatal(err)
	}
	h := &exportHarness{st: st, view: &recordingView{}, tiers: func() []string { return nil }}
	mux := http.NewServeMux()
	mux.Handle(viewv1connect.NewViewServiceHandler(h.view))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	h.x = &Exporter{
		Store:  st,
		Caller: &Caller{Tokens: testTokens{}, Resolve: func(string) string { return srv.URL }},
		Tiers: func(context.Context, string) ([]string, error) {
			return h.tiers(), nil
		},
		PageEntries: 4,
	}
	return h
}

// TestExportSendsWhatTheTiersAllow: without accounts a view gets the public
// reference data and never a transaction; granted accounts later, the
// account data follows from its oldest entry and nothing is sent twice.
// Every call carries the token for the view's instance.
func TestExportSendsWhatTheTiersAllow(t *testing.T) {
	h := newExportHarness(t)
	ctx := t.Context()
	days := storetest.Days(0, 25)
	res, err := h.x.Run(ctx, "csv", "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.view.counts(), map[string]int{"fx": days, "price": days, "index": days}; !equalCounts(got, want) {
		t.Errorf("without accounts the view got %v, want %v", got, want)
	}
	if res.Entries != 3*days || res.Pages != (3*days+3)/4 {
		t.Errorf("run: %+v", res)
	}
	h.tiers = func() []string { return []string{TierAccounts} }
	if _, err := h.x.Run(ctx, "csv", "run-2"); err != nil {
		t.Fatal(err)
	}
	if got, want := h.view.counts(), map[string]int{"fx": days, "price": days, "index": days, "tx": 25, "balance": days}; !equalCounts(got, want) {
		t.Errorf("with accounts the view has %v, want %v", got, want)
	}
	for _, tok := range h.view.tokens {
		if tok != "Bearer test-token-csv" {
			t.Fatalf("a call carried %q, want the csv instance's token", tok)
		}
	}
	// Nothing new: nothing sent.
	if res, err := h.x.Run(ctx, "csv", "run-3"); err != nil || res.Entries != 0 {
		t.Errorf("a run with nothing new: %+v, %v", res, err)
	}
}

// TestExportStopsWhenTheGrantNarrows: a grant narrowed during a run stops
// it before the next page; what the view kept stays kept, nothing of
// accounts is sent after the narrowing.
func TestExportStopsWhenTheGrantNarrows(t *testing.T) {
	h := newExportHarness(t)
	calls := 0
	h.tiers = func() []string {
		calls++
		if calls == 1 {
			return []string{TierAccounts}
		}
		return nil
	}
	res, err := h.x.Run(t.Context(), "csv", "run-1")
	if !errors.Is(err, ErrGrantChanged) {
		t.Fatalf("run: %+v, %v; want ErrGrantChanged", res, err)
	}
	if res.Pages != 1 || len(h.view.entries) != 4 {
		t.Errorf("after the narrowing the view had %d entries in %d pages, want one page of 4", len(h.view.entries), res.Pages)
	}
	places, err := h.st.ViewPlaces(t.Context(), "csv")
	if err != nil {
		t.Fatal(err)
	}
	before := len(h.view.entries)
	if _, err := h.x.Run(t.Context(), "csv", "run-2"); err != nil {
		t.Fatal(err)
	}
	for _, e := range h.view.entries[before:] {
		if e.GetTransaction() != nil || e.GetBalanceAssertion() != nil {
			t.Fatalf("account data sent after the grant lost accounts: %v", e)
		}
	}
	after, _ := h.st.ViewPlaces(t.Context(), "csv")
	if after[store.KindTransactions] != places[store.KindTransactions] {
		t.Errorf("the transactions' place moved from %d to %d without accounts", places[store.KindTransactions], after[store.KindTransactions])
	}
}

// TestExportFailedPageIsSentAgain: a page the view refused leaves its
// place; the next run sends the same entries.
func TestExportFailedPageIsSentAgain(t *testing.T) {
	h := newExportHarness(t)
	h.view.fail = connect.NewError(connect.CodeUnavailable, errors.New("the WebDAV server is down"))
	if _, err := h.x.Run(t.Context(), "csv", "run-1"); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("run against a failing view: %v", err)
	}
	if places, _ := h.st.ViewPlaces(t.Context(), "csv"); len(places) != 0 {
		t.Errorf("the place moved past a refused page: %v", places)
	}
	if _, err := h.x.Run(t.Context(), "csv", "run-2"); err != nil {
		t.Fatal(err)
	}
	days := storetest.Days(0, 25)
	if got, want := h.view.counts(), map[string]int{"fx": days, "price": days, "index": days}; !equalCounts(got, want) {
		t.Errorf("after the retry the view has %v, want %v (each once)", got, want)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestExportPagesStayUnderTheByteBound: a page whose encoding exceeds
// MaxRequestBytes is read again with fewer entries; every entry still
// arrives, once, and no request the view got was above the bound.
func TestExportPagesStayUnderTheByteBound(t *testing.T) {
	h := newExportHarness(t)
	h.tiers = func() []string { return []string{TierAccounts} }
	h.x.PageEntries = 40
	h.x.MaxRequestBytes = 2000
	var largest int
	inner := h.x.Caller
	h.x.Caller = &Caller{Tokens: inner.Tokens, Resolve: inner.Resolve, HTTP: &http.Client{Transport: sizeRecorder{max: &largest}}}
	res, err := h.x.Run(t.Context(), "csv", "run-1")
	if err != nil {
		t.Fatal(err)
	}
	days := storetest.Days(0, 25)
	if got, want := h.view.counts(), map[string]int{"fx": days, "price": days, "index": days, "tx": 25, "balance": days}; !equalCounts(got, want) {
		t.Errorf("the view has %v, want %v", got, want)
	}
	if res.Pages < 3 || largest > 2000+64 {
		t.Errorf("%d pages, the largest request body %d bytes: want several pages under the bound", res.Pages, largest)
	}
}

// sizeRecorder keeps the largest request body it carried.
type sizeRecorder struct{ max *int }

func (s sizeRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.ContentLength > int64(*s.max) {
		*s.max = int(r.ContentLength)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// pageRecorder is a ViewStore that keeps the bounds of every page read and
// the bytes it held.
type pageRecorder struct {
	ViewStore
	mu    sync.Mutex
	pages []store.Page
	bytes []int64
}

func (r *pageRecorder) ReadPage(ctx context.Context, view string, kinds []store.EntryKind, b store.PageBounds) (store.Page, error) {
	p, err := r.ViewStore.ReadPage(ctx, view, kinds, b)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pages = append(r.pages, p)
	r.bytes = append(r.bytes, b.Bytes)
	return p, err
}

// TestExportReadsPagesWithinTheByteBound: behind transactions of many long
// postings, the Exporter has the store read each page within its byte
// bound, before it is read: no page it holds is above MaxRequestBytes,
// unless it is a single entry, and every entry still arrives once.
func TestExportReadsPagesWithinTheByteBound(t *testing.T) {
	h := newExportHarness(t)
	for i := range 8 {
		d := storetest.LargeTransaction(fmt.Sprintf("big-%d", i), fmt.Sprintf("big-%d", i), 40, 4000) // about 170 KB
		if _, err := h.st.Import(t.Context(), "bank", store.KindSync, d); err != nil {
			t.Fatal(err)
		}
	}
	h.tiers = func() []string { return []string{TierAccounts} }
	h.x.PageEntries = DefaultExportPageEntries
	h.x.MaxRequestBytes = 400 << 10
	rec := &pageRecorder{ViewStore: h.st}
	h.x.Store = rec
	if _, err := h.x.Run(t.Context(), "csv", "run-1"); err != nil {
		t.Fatal(err)
	}
	for i, p := range rec.pages {
		if len(p.Entries) > 1 && p.Bytes > int64(h.x.MaxRequestBytes) {
			t.Errorf("page %d held %d entries of %d bytes (asked for at most %d): above the request's %d", i, len(p.Entries), p.Bytes, rec.bytes[i], h.x.MaxRequestBytes)
		}
	}
	days := storetest.Days(0, 25)
	if got, want := h.view.counts(), map[string]int{"fx": days, "price": days, "index": days, "tx": 25 + 8, "balance": days}; !equalCounts(got, want) {
		t.Errorf("the view has %v, want %v", got, want)
	}
}
