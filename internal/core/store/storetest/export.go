package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/arkadiuss/openfief/internal/core/store"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// exportCases are the suite's cases of what views are sent (OF-35).
var exportCases = []struct {
	name string
	run  func(*testing.T, Backend)
}{
	{"ExportPagesEverythingOnce", testExportPages},
	{"ExportOnlyWhatIsNew", testExportIncremental},
	{"ExportKindsApart", testExportKinds},
	{"ExportPlacesPerView", testExportViews},
	{"ExportWhileImporting", testExportWhileImporting},
	{"MigrationNumbersEarlierEntries", testMigrationNumbers},
	{"ExportPageBytesBoundedBeforeRead", testExportPageBytes},
	{"ViewLagCountsWhatIsNotSent", testViewLag},
}

// drain reads view's pages of kinds, limit entries each, advancing after
// every page, until the store says there is no more; it returns every entry
// in the order sent and fails on a page that breaks the rules: a number not
// above the kind's place, a page above limit, an empty page that says more.
func drain(t *testing.T, s *store.Store, view string, kinds []store.EntryKind, limit int) []store.Entry {
	t.Helper()
	ctx := context.Background()
	var out []store.Entry
	for range 10000 {
		before, err := s.ViewPlaces(ctx, view)
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.ReadPage(ctx, view, kinds, store.PageBounds{Entries: limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Entries) > limit {
			t.Fatalf("a page of %d entries, limit %d", len(p.Entries), limit)
		}
		if p.More && len(p.Entries) == 0 {
			t.Fatal("an empty page says there is more")
		}
		last := before
		for _, e := range p.Entries {
			if e.Seq <= last[e.Kind] {
				t.Fatalf("%s entry %d is not after the place %d", e.Kind, e.Seq, last[e.Kind])
			}
			last[e.Kind] = e.Seq
		}
		out = append(out, p.Entries...)
		if err := s.AdvanceView(ctx, view, p.Places); err != nil {
			t.Fatal(err)
		}
		if !p.More {
			return out
		}
	}
	t.Fatal("the pages never end")
	return nil
}

// byKind counts entries by kind.
func byKind(es []store.Entry) map[store.EntryKind]int {
	out := map[store.EntryKind]int{}
	for _, e := range es {
		out[e.Kind]++
	}
	return out
}

// allKinds is every kind of entry a view may be sent.
var allKinds = store.EntryKinds

// publicKinds need no data tier (OF-11).
var publicKinds = []store.EntryKind{store.KindFxRates, store.KindPrices, store.KindIndexReadings}

func wantKinds(tx, days int) map[store.EntryKind]int {
	return map[store.EntryKind]int{
		store.KindTransactions: tx, store.KindBalanceAssertions: days, store.KindPrices: days,
		store.KindFxRates: days, store.KindIndexReadings: days,
	}
}

func testExportPages(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	d := Sync("b0", 0, 25, "w0")
	mustImport(t, s, "fx-a", store.KindSync, d)
	got := drain(t, s, "csv", allKinds, 7)
	if diff := cmp.Diff(wantKinds(25, Days(0, 25)), byKind(got)); diff != "" {
		t.Errorf("entries by kind (-want +got):\n%s", diff)
	}
	seen := map[int64]bool{}
	for _, e := range got {
		if seen[e.Seq] {
			t.Errorf("number %d sent twice", e.Seq)
		}
		seen[e.Seq] = true
		if e.Source != "fx-a" || e.Institution.GetId() != "testbank" || e.Institution.GetName() != "Test Bank" {
			t.Errorf("entry %d: source %q, institution %v", e.Seq, e.Source, e.Institution)
		}
	}
	// Each entry exactly as delivered, transactions with their postings.
	var txs []*connectorv1.Transaction
	var bals []*connectorv1.BalanceAssertion
	var prices []*connectorv1.Price
	var fx []*connectorv1.FxRate
	var idx []*connectorv1.IndexReading
	for _, e := range got {
		switch e.Kind {
		case store.KindTransactions:
			txs = append(txs, e.Transaction)
		case store.KindBalanceAssertions:
			bals = append(bals, e.BalanceAssertion)
		case store.KindPrices:
			prices = append(prices, e.Price)
		case store.KindFxRates:
			fx = append(fx, e.FxRate)
		case store.KindIndexReadings:
			idx = append(idx, e.IndexReading)
		}
	}
	for name, pair := range map[string][2]any{
		"transactions": {d.GetTransactions(), txs}, "balance assertions": {d.GetBalanceAssertions(), bals},
		"prices": {d.GetPrices(), prices}, "FX rates": {d.GetFxRates(), fx}, "index readings": {d.GetIndexReadings(), idx},
	} {
		if diff := cmp.Diff(pair[0], pair[1], protocmp.Transform()); diff != "" {
			t.Errorf("%s sent differ from those delivered (-delivered +sent):\n%s", name, diff)
		}
	}
	if again := drain(t, s, "csv", allKinds, 7); len(again) != 0 {
		t.Errorf("after everything was kept, %d entries sent again", len(again))
	}
}

func testExportIncremental(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	mustImport(t, s, "fx-a", store.KindSync, Sync("b0", 0, 25, "w0"))
	first := drain(t, s, "csv", allKinds, 100)
	// Transactions 20..34: 20..24 are stored already, and so are the
	// other entries of their day.
	mustImport(t, s, "fx-a", store.KindSync, Sync("b1", 20, 15, "w1"))
	second := drain(t, s, "csv", allKinds, 100)
	newDays := Days(0, 35) - Days(0, 25)
	if diff := cmp.Diff(wantKinds(10, newDays), byKind(second)); diff != "" {
		t.Errorf("the second run's entries by kind (-want +got):\n%s", diff)
	}
	for _, e := range second {
		if e.Transaction != nil && e.Transaction.GetSourceId() < SourceID(25) {
			t.Errorf("transaction %s sent again", e.Transaction.GetSourceId())
		}
		if e.Seq <= first[len(first)-1].Seq {
			t.Errorf("entry %d of the second run is numbered before the first run's last", e.Seq)
		}
	}
}

func testExportKinds(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	mustImport(t, s, "ibkr", store.KindSync, Sync("b0", 0, 25, "w0"))
	days := Days(0, 25)
	public := drain(t, s, "csv", publicKinds, 4)
	if diff := cmp.Diff(map[store.EntryKind]int{store.KindPrices: days, store.KindFxRates: days, store.KindIndexReadings: days}, byKind(public)); diff != "" {
		t.Errorf("without accounts, entries by kind (-want +got):\n%s", diff)
	}
	// Granted accounts later: the account data starts from its oldest
	// entry, and nothing public is sent again.
	later := drain(t, s, "csv", allKinds, 4)
	if diff := cmp.Diff(map[store.EntryKind]int{store.KindTransactions: 25, store.KindBalanceAssertions: days}, byKind(later)); diff != "" {
		t.Errorf("with accounts, entries by kind (-want +got):\n%s", diff)
	}
}

func testExportViews(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	ctx := context.Background()
	mustImport(t, s, "fx-a", store.KindSync, Sync("b0", 0, 25, "w0"))
	all := drain(t, s, "csv", allKinds, 100)
	if got := drain(t, s, "nextcloud", allKinds, 100); len(got) != len(all) {
		t.Errorf("view nextcloud got %d entries, csv %d: one view's place moved the other's", len(got), len(all))
	}
	// A late acknowledgement never moves a place back.
	places, err := s.ViewPlaces(ctx, "csv")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AdvanceView(ctx, "csv", map[store.EntryKind]int64{store.KindTransactions: 1}); err != nil {
		t.Fatal(err)
	}
	if after, _ := s.ViewPlaces(ctx, "csv"); after[store.KindTransactions] != places[store.KindTransactions] {
		t.Errorf("the place moved back from %d to %d", places[store.KindTransactions], after[store.KindTransactions])
	}
	// Reset: everything again.
	if err := s.ResetView(ctx, "csv"); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, s, "csv", allKinds, 100); len(got) != len(all) {
		t.Errorf("after a reset %d entries, want all %d", len(got), len(all))
	}
	if _, err := s.ReadPage(ctx, "csv", allKinds, store.PageBounds{}); err == nil {
		t.Error("a page of 0 entries was read")
	}
	if _, err := s.ReadPage(ctx, "csv", allKinds, store.PageBounds{Entries: store.MaxPageEntries + 1}); err == nil {
		t.Error("a page above MaxPageEntries was read")
	}
}

// testExportWhileImporting pages through the record while six instances
// import into it: at the end the view was sent every entry exactly once.
// A number handed out before a smaller one was visible would be skipped.
func testExportWhileImporting(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	const instances, batches, n = 6, 4, 60
	var wg sync.WaitGroup
	errs := make(chan error, instances*batches)
	for i := range instances {
		wg.Go(func() {
			name := fmt.Sprintf("plugin-%d", i)
			for j := range batches {
				if _, err := s.Import(context.Background(), name, store.KindSync, Sync(fmt.Sprintf("b%d", j), j*n, n, "")); err != nil {
					errs <- fmt.Errorf("%s batch %d: %w", name, j, err)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var got []store.Entry
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		got = append(got, drain(t, s, "csv", allKinds, 50)...)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	want := instances * (batches*n + 4*Days(0, batches*n))
	seen := map[int64]bool{}
	for _, e := range got {
		if seen[e.Seq] {
			t.Errorf("number %d sent twice", e.Seq)
		}
		seen[e.Seq] = true
	}
	if len(got) != want {
		t.Errorf("the view was sent %d entries while the imports ran, want %d", len(got), want)
	}
}

// testMigrationNumbers: entries stored by a core of schema version 1, before
// entries had numbers, get distinct numbers when the database is migrated,
// are sent to a view like any other, and entries stored afterwards are
// numbered after them.
func testMigrationNumbers(t *testing.T, b Backend) {
	ctx := context.Background()
	dsn := b.NewDSN(t)
	old, err := b.OpenAt(ctx, dsn, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO instances (instance) VALUES ('old')`,
		`INSERT INTO batches (instance, batch_id, kind, institution_id, institution_name, watermark) VALUES ('old', 'b0', 'sync', 'nbp', 'NBP', 'w')`,
		`INSERT INTO transactions (instance, source_id, batch_id, date, value_date, description, payee) VALUES ('old', 't2', 'b0', '2026-01-02', '', 'second', ''), ('old', 't1', 'b0', '2026-01-01', '', 'first', '')`,
		`INSERT INTO postings (instance, source_id, idx, account_id, amount, currency, isin, symbol, exchange, instrument_currency, instrument_name, quantity, memo)
VALUES ('old', 't1', 0, 'a', '-1', 'PLN', '', '', '', '', '', '', ''), ('old', 't1', 1, 'b', '1', 'PLN', '', '', '', '', '', '', '')`,
		`INSERT INTO fx_rates (instance, batch_id, date, base_currency, quote_currency, rate, source_ref) VALUES ('old', 'b0', '2026-01-01', 'EUR', 'PLN', '4.28', ''), ('old', 'b0', '2026-01-02', 'EUR', 'PLN', '4.29', '')`,
		`INSERT INTO prices (instance, batch_id, date, isin, symbol, exchange, instrument_currency, instrument_name, currency, price) VALUES ('old', 'b0', '2026-01-01', 'IE00BK5BQT80', '', '', '', '', 'EUR', '120')`,
		`INSERT INTO balance_assertions (instance, batch_id, account_id, date, currency, isin, symbol, exchange, instrument_currency, instrument_name, amount, quantity) VALUES ('old', 'b0', 'a', '2026-01-02', 'PLN', '', '', '', '', '', '10', '')`,
		`INSERT INTO index_readings (instance, batch_id, index_id, date, value, name) VALUES ('old', 'b0', 'cpi', '2026-01-01', '104.1', '')`,
	} {
		if err := b.Exec(ctx, old, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s := open(t, dsn)
	got := drain(t, s, "csv", allKinds, 3)
	if len(got) != 7 {
		t.Fatalf("%d entries of the older schema sent, want 7: %v", len(got), byKind(got))
	}
	seen := map[int64]bool{}
	for _, e := range got {
		if e.Seq < 1 || e.Seq > 7 || seen[e.Seq] {
			t.Errorf("entry %s numbered %d: want distinct numbers 1 to 7", e.Kind, e.Seq)
		}
		seen[e.Seq] = true
		if e.Transaction.GetSourceId() == "t1" && len(e.Transaction.GetPostings()) != 2 {
			t.Errorf("transaction t1 sent with %d postings, want 2", len(e.Transaction.GetPostings()))
		}
	}
	mustImport(t, s, "new", store.KindSync, Sync("b0", 0, 1, "w"))
	for _, e := range drain(t, s, "csv", allKinds, 3) {
		if e.Seq <= 7 {
			t.Errorf("an entry stored after the migration is numbered %d, not after the older ones", e.Seq)
		}
	}
}
