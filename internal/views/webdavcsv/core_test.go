package webdavcsv

import (
	"context"
	"encoding/csv"
	"errors"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	ofcore "github.com/arkadiuss/openfief/internal/core"
	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/core/store/storetest"
)

// coreTokens is the core's token source: a token for the instance asked
// for, or, with as set, for another instance whatever is asked.
type coreTokens struct {
	t  *testing.T
	c  *core
	as string
}

func (k coreTokens) Token(_ context.Context, instance string) (string, error) {
	if k.as != "" {
		instance = k.as
	}
	return k.c.sign(k.t, instance), nil
}

// grant is the view's data tiers as the test sets them; narrowAfter, when
// positive, drops them to none once they have been read that many times.
type grant struct {
	mu          sync.Mutex
	tiers       []string
	reads       int
	narrowAfter int
}

func (g *grant) read(context.Context, string) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reads++
	if g.narrowAfter > 0 && g.reads > g.narrowAfter {
		g.tiers = nil
	}
	return slices.Clone(g.tiers), nil
}

func (g *grant) set(tiers ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tiers, g.reads, g.narrowAfter = tiers, 0, 0
}

// rows counts the data rows of every file of the folder, by the file's
// kind (the name after the month), and returns the distinct values of the
// column named col in the transactions files.
func (d *davServer) rows(t *testing.T, col string) (map[string]int, map[string]bool) {
	t.Helper()
	counts, values := map[string]int{}, map[string]bool{}
	for _, month := range []string{"2026-01", "2026-02"} {
		for _, kind := range []string{"fx-rates", "prices", "index-readings", "transactions", "balances"} {
			body, ok := d.read(folderPath + "2026/" + month + "-" + kind + ".csv")
			if !ok {
				continue
			}
			recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
			if err != nil {
				t.Fatalf("%s %s: %v", month, kind, err)
			}
			counts[kind] += len(recs) - 1
			if kind == "transactions" {
				i := slices.Index(recs[0], col)
				for _, r := range recs[1:] {
					values[r[i]] = true
				}
			}
		}
	}
	return counts, values
}

// openCoreStore opens the core's store on a new SQLite file.
func openCoreStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "core.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// TestCoreExportsToWebDAV is the whole path of an export: openfief-core's
// Exporter and Views, reading a real SQLite store and calling with its
// Caller (a token for the view's instance alone), to webdav-csv served by
// the SDK behind its token check, which writes through the project's
// egress proxy to golang.org/x/net/webdav over TLS. The view gets exactly
// what its tiers allow; a narrowed grant stops the reads mid-export;
// another instance's token writes nothing; a second export sends only
// what is new.
func TestCoreExportsToWebDAV(t *testing.T) {
	h := setup(t, davHost, folderPath, Config{})
	ctx := t.Context()
	st := openCoreStore(t)
	if _, err := st.Import(ctx, "bank", store.KindSync, storetest.Sync("b0", 0, 25, "w0")); err != nil {
		t.Fatal(err)
	}
	g := &grant{}
	x := &ofcore.Exporter{
		Store:       st,
		Caller:      &ofcore.Caller{Tokens: coreTokens{t: t, c: h.core}, Resolve: func(string) string { return h.core.url }},
		Tiers:       g.read,
		PageEntries: 10,
	}
	days := storetest.Days(0, 25)

	// No tiers: the public reference data, never a transaction or a balance.
	if _, err := x.Run(ctx, instance, "run-1"); err != nil {
		t.Fatal(err)
	}
	got, _ := h.dav.rows(t, "source_id")
	if want := map[string]int{"fx-rates": days, "prices": days, "index-readings": days}; !maps.Equal(got, want) {
		t.Fatalf("without accounts the folder holds %v, want %v", got, want)
	}

	// Nothing new: nothing sent, nothing written.
	h.dav.log()
	if res, err := x.Run(ctx, instance, "run-2"); err != nil || res.Entries != 0 {
		t.Fatalf("a run with nothing new: %+v, %v", res, err)
	}
	if reqs := h.dav.log(); len(reqs) != 0 {
		t.Fatalf("a run with nothing new reached the server: %v", reqs)
	}

	// Granted accounts: the account data from its oldest entry, the rest
	// untouched.
	g.set(ofcore.TierAccounts)
	if _, err := x.Run(ctx, instance, "run-3"); err != nil {
		t.Fatal(err)
	}
	got, ids := h.dav.rows(t, "source_id")
	if want := map[string]int{"fx-rates": days, "prices": days, "index-readings": days, "transactions": 2 * 25, "balances": days}; !maps.Equal(got, want) {
		t.Fatalf("with accounts the folder holds %v, want %v (a row per posting)", got, want)
	}
	if len(ids) != 25 {
		t.Fatalf("%d transactions in the folder, want 25", len(ids))
	}

	// Another instance's token: refused by the view before it writes.
	other := &ofcore.Exporter{
		Store: st, Tiers: g.read, PageEntries: 10,
		Caller: &ofcore.Caller{Tokens: coreTokens{t: t, c: h.core, as: "another-view"}, Resolve: func(string) string { return h.core.url }},
	}
	if _, err := st.Import(ctx, "bank", store.KindSync, storetest.Sync("b1", 400, 30, "w1")); err != nil {
		t.Fatal(err)
	}
	before, _ := st.ViewPlaces(ctx, instance)
	h.dav.log()
	if _, err := other.Run(ctx, instance, "run-4"); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("a call with another instance's token: %v, want Unauthenticated", err)
	}
	if reqs := h.dav.log(); len(reqs) != 0 {
		t.Fatalf("a call with another instance's token reached the server: %v", reqs)
	}
	if after, _ := st.ViewPlaces(ctx, instance); !maps.Equal(after, before) {
		t.Fatalf("a refused page moved the view's place from %v to %v", before, after)
	}

	// The grant narrowed after the first page: the export stops there, and
	// the next export under the narrowed grant sends no account data.
	g.set(ofcore.TierAccounts)
	g.narrowAfter = 1
	res, err := x.Run(ctx, instance, "run-5")
	if !errors.Is(err, ofcore.ErrGrantChanged) || res.Pages != 1 {
		t.Fatalf("a run whose grant narrowed after its first page: %+v, %v, want one page and ErrGrantChanged", res, err)
	}
	_, ids = h.dav.rows(t, "source_id")
	if n := len(ids) - 25; n > 10 || n < 1 {
		t.Fatalf("%d new transactions written, want the first page's (1 to 10)", n)
	}
	sent := len(ids)
	if _, err := x.Run(ctx, instance, "run-6"); err != nil {
		t.Fatal(err)
	}
	got, ids = h.dav.rows(t, "source_id")
	if len(ids) != sent {
		t.Fatalf("after the narrowing %d more transactions were written", len(ids)-sent)
	}
	newDays := storetest.Days(400, 30)
	if got["fx-rates"] != days+newDays {
		t.Fatalf("after the narrowing the folder has %d FX rates, want %d", got["fx-rates"], days+newDays)
	}

	// The second export sent only what was new: every file holds each
	// entry once.
	for _, kind := range []string{"fx-rates", "prices", "index-readings", "balances"} {
		if got[kind] > days+newDays {
			t.Errorf("%s: %d rows, more than the %d entries stored", kind, got[kind], days+newDays)
		}
	}
}

// TestCoreViewsPokeWebDAV: core.Views runs the export on its own when an
// import announces new entries, and records the outcome.
func TestCoreViewsPokeWebDAV(t *testing.T) {
	h := setup(t, davHost, folderPath, Config{})
	ctx := t.Context()
	st := openCoreStore(t)
	v := ofcore.NewViews(ctx, ofcore.ViewOptions{
		Exporter: &ofcore.Exporter{Store: st, Caller: &ofcore.Caller{Tokens: coreTokens{t: t, c: h.core}, Resolve: func(string) string { return h.core.url }}},
		Store:    st, FirstDelay: -1, Settle: -1, Interval: time.Hour, Log: slog.New(slog.DiscardHandler),
	})
	t.Cleanup(func() { v.Update(nil); v.Wait() })
	v.Update([]ofcore.Target{{Instance: instance, View: true}})
	waitRecorded := func(after time.Time) store.InstanceRecord {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if rec, err := st.Status(ctx, instance); err == nil && rec.LastSync.After(after) {
				return rec
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("no export was recorded within 20s")
		return store.InstanceRecord{}
	}
	first := waitRecorded(time.Time{})
	if !first.LastOK {
		t.Fatalf("first export: %+v", first)
	}
	if _, err := st.Import(ctx, "bank", store.KindSync, storetest.Sync("b0", 0, 5, "w0")); err != nil {
		t.Fatal(err)
	}
	v.Poke()
	if rec := waitRecorded(first.LastSync); !rec.LastOK {
		t.Fatalf("export after the poke: %+v", rec)
	}
	got, _ := h.dav.rows(t, "source_id")
	if want := map[string]int{"fx-rates": 1, "prices": 1, "index-readings": 1}; !maps.Equal(got, want) {
		t.Fatalf("after the poke the folder holds %v, want %v", got, want)
	}
}
