// Package storetest is the one storage suite every database behind
// internal/core/store must pass (SQLite and PostgreSQL alike), with the
// deliveries it imports.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/sdk/go/delivery"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// Backend is one database the suite runs against.
type Backend struct {
	// NewDSN returns the DSN of a new, empty database for one test.
	NewDSN func(t *testing.T) string
	// SetHook installs hook in s's imports, between statements (the store
	// exposes this to its own tests only); nil removes it.
	SetHook func(s *store.Store, hook func(step int) error)
	// Interrupt makes the database unavailable to s in the middle of an
	// import's transaction: it returns the error the hook should fail with,
	// or nil when the database itself will fail the next statement (a
	// terminated connection).
	Interrupt func(t *testing.T, s *store.Store) error
	// OpenAt opens a DSN migrated only up to a schema version (the store
	// exposes this to its own tests only).
	OpenAt func(ctx context.Context, dsn string, upTo int) (*store.Store, error)
	// Exec runs one statement, '?' placeholders, on a store's database.
	Exec func(ctx context.Context, s *store.Store, q string, args ...any) error
	// Loaded is the bytes of entries a store's ReadPage has read so far,
	// by their sizes (the store exposes this to its own tests only).
	Loaded func(s *store.Store) int64
	// Dump returns every row of every table, SetBackupHook runs a hook in a
	// backup's transaction with the same dump as the backup sees the
	// record, TableNames lists the database's tables and BackupTables the
	// tables a backup covers (the store exposes these to its own tests
	// only).
	Dump          func(ctx context.Context, s *store.Store) (map[string][]string, error)
	SetBackupHook func(s *store.Store, hook func(map[string][]string, error))
	TableNames    func(ctx context.Context, s *store.Store) ([]string, error)
	BackupTables  func() []string
}

// open opens dsn and closes it when the test ends. A record to migrate is
// backed up first into a temporary directory (PostgreSQL needs one).
func open(t *testing.T, dsn string) *store.Store {
	t.Helper()
	s, err := store.OpenWith(context.Background(), dsn, store.OpenOptions{PreMigrationBackupDir: t.TempDir()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Run runs every case of the suite against b.
func Run(t *testing.T, b Backend) {
	cases := []struct {
		name string
		run  func(*testing.T, Backend)
	}{
		{"StoresRows", testStoresRows},
		{"RepeatStoresNothing", testRepeat},
		{"OverlapStoresOnlyNew", testOverlap},
		{"RefusedStoresNothing", testRefused},
		{"WatermarkOnlyWithImport", testWatermark},
		{"InstancesIsolated", testIsolation},
		{"Interrupted", testInterrupted},
		{"ConcurrentInstances", testConcurrent},
		{"SyncStatus", testSyncStatus},
		{"Reopen", testReopen},
		{"ExactText", testExactText},
		{"DeclaredImbalanceStored", testDeclaredImbalance},
	}
	cases = append(cases, exportCases...)
	cases = append(cases, metricsCases...)
	cases = append(cases, backupCases...)
	cases = append(cases, leaseCases...)
	for _, c := range append(cases, removedCases...) {
		t.Run(c.name, func(t *testing.T) { c.run(t, b) })
	}
}

// want is the ImportResult of Sync(_, first, n, _) into an empty store.
func want(first, n int) store.ImportResult {
	days := Days(first, n)
	return store.ImportResult{Transactions: n, Postings: 2 * n, Balances: days, Prices: days, FxRates: days, IndexReadings: days, Problems: 1}
}

// rows is what Status should count after results rs.
func rows(rs ...store.ImportResult) store.RowCounts {
	var c store.RowCounts
	for _, r := range rs {
		if !r.Duplicate {
			c.Batches++
		}
		c.Transactions += r.Transactions
		c.Postings += r.Postings
		c.Balances += r.Balances
		c.Prices += r.Prices
		c.FxRates += r.FxRates
		c.IndexReadings += r.IndexReadings
		c.Problems += r.Problems
	}
	return c
}

func mustImport(t *testing.T, s *store.Store, instance string, kind store.Kind, d *connectorv1.Delivery) store.ImportResult {
	t.Helper()
	res, err := s.Import(context.Background(), instance, kind, d)
	if err != nil {
		t.Fatalf("Import(%s, %s): %v", instance, d.GetBatchId(), err)
	}
	return res
}

func checkRows(t *testing.T, s *store.Store, instance string, want store.RowCounts) {
	t.Helper()
	st, err := s.Status(context.Background(), instance)
	if err != nil {
		t.Fatalf("Status(%s): %v", instance, err)
	}
	if diff := cmp.Diff(want, st.Rows); diff != "" {
		t.Errorf("Status(%s).Rows (-want +got):\n%s", instance, diff)
	}
}

func checkWatermark(t *testing.T, s *store.Store, instance, want string) {
	t.Helper()
	got, err := s.Watermark(context.Background(), instance)
	if err != nil {
		t.Fatalf("Watermark(%s): %v", instance, err)
	}
	if got != want {
		t.Errorf("Watermark(%s) = %q, want %q", instance, got, want)
	}
}

func testStoresRows(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	if err := store.Validate("nbp-fx", store.KindSync, Sync("b1", 0, 25, "w1")); err != nil {
		t.Errorf("Validate of a valid delivery: %v", err)
	}
	res := mustImport(t, s, "nbp-fx", store.KindSync, Sync("b1", 0, 25, "w1"))
	if diff := cmp.Diff(want(0, 25), res); diff != "" {
		t.Errorf("Import (-want +got):\n%s", diff)
	}
	checkRows(t, s, "nbp-fx", rows(res))
	checkWatermark(t, s, "nbp-fx", "w1")
	names, err := s.Instances(context.Background())
	if err != nil || !cmp.Equal(names, []string{"nbp-fx"}) {
		t.Errorf("Instances = %v, %v; want [nbp-fx]", names, err)
	}
}

func testRepeat(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	first := mustImport(t, s, "nbp-fx", store.KindSync, Sync("b1", 0, 25, "w1"))
	again := mustImport(t, s, "nbp-fx", store.KindSync, Sync("b1", 0, 25, "w1"))
	if diff := cmp.Diff(store.ImportResult{Duplicate: true}, again); diff != "" {
		t.Errorf("same delivery again (-want +got):\n%s", diff)
	}
	// The same rows in a new batch (a second Sync that found nothing new).
	next := mustImport(t, s, "nbp-fx", store.KindSync, Sync("b2", 0, 25, "w1"))
	if next.Rows() != 0 || next.Duplicate {
		t.Errorf("same rows, new batch: %+v, want no rows and not Duplicate", next)
	}
	checkRows(t, s, "nbp-fx", rows(first, next))
}

func testOverlap(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	first := mustImport(t, s, "nbp-fx", store.KindSync, Sync("b1", 0, 20, "w1"))
	second := mustImport(t, s, "nbp-fx", store.KindSync, Sync("b2", 15, 20, "w2")) // 15..34: 20..34 are new
	days := Days(20, 15)
	wantSecond := store.ImportResult{Transactions: 15, Postings: 30, Balances: days, Prices: days, FxRates: days, IndexReadings: days}
	if diff := cmp.Diff(wantSecond, second); diff != "" {
		t.Errorf("overlapping delivery (-want +got):\n%s", diff)
	}
	checkRows(t, s, "nbp-fx", rows(first, second))
	checkWatermark(t, s, "nbp-fx", "w2")
}

// refusal is one delivery that breaks a rule, the field named, and the rule.
type refusal struct {
	instance string
	kind     store.Kind
	delivery func() *connectorv1.Delivery
	field    string
	rule     error
}

func refusals() map[string]refusal {
	base := func(edit func(d *connectorv1.Delivery)) func() *connectorv1.Delivery {
		return func() *connectorv1.Delivery {
			d := Sync("bad", 100, 10, "w-bad")
			edit(d)
			return d
		}
	}
	return map[string]refusal{
		"unbalanced transaction": {delivery: base(func(d *connectorv1.Delivery) {
			d.Transactions[3].Postings[0].Amount = "-1.00"
		}), field: "transactions[3].postings", rule: store.ErrUnbalanced},
		"bad decimal": {delivery: base(func(d *connectorv1.Delivery) {
			d.Transactions[2].Postings[1].Amount = "1e5"
		}), field: "transactions[2].postings[1].amount", rule: delivery.ErrNotDecimal},
		"float-looking rate": {delivery: base(func(d *connectorv1.Delivery) {
			d.FxRates[0].Rate = "4,28"
		}), field: "fx_rates[0].rate", rule: delivery.ErrNotDecimal},
		"missing source_id": {delivery: base(func(d *connectorv1.Delivery) {
			d.Transactions[5].SourceId = ""
		}), field: "transactions[5].source_id", rule: delivery.ErrRequired},
		"missing batch_id": {delivery: base(func(d *connectorv1.Delivery) {
			d.BatchId = ""
		}), field: "batch_id", rule: delivery.ErrRequired},
		"NUL in text": {delivery: base(func(d *connectorv1.Delivery) {
			d.Transactions[1].Description = "a\x00b"
		}), field: "transactions[1].description", rule: store.ErrNotText},
		"too long": {delivery: base(func(d *connectorv1.Delivery) {
			d.Transactions[1].Payee = strings.Repeat("p", store.MaxText+1)
		}), field: "transactions[1].payee", rule: store.ErrTooLong},
		"too big": {delivery: func() *connectorv1.Delivery {
			return Sync("big", 0, store.MaxBatchRows+1, "w-big")
		}, field: "delivery", rule: store.ErrTooLarge},
		"bad instance": {instance: "Not_A_Name", delivery: base(func(*connectorv1.Delivery) {}), field: "instance", rule: store.ErrInstanceName},
		"no kind":      {kind: -1, delivery: base(func(*connectorv1.Delivery) {}), field: "kind", rule: store.ErrKind},
	}
}

func testRefused(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	first := mustImport(t, s, "nbp-fx", store.KindSync, Sync("b1", 0, 10, "w1"))
	for name, r := range refusals() {
		t.Run(name, func(t *testing.T) {
			instance, kind := "nbp-fx", store.KindSync
			if r.instance != "" {
				instance = r.instance
			}
			if r.kind != 0 {
				kind = r.kind
			}
			res, err := s.Import(context.Background(), instance, kind, r.delivery())
			var ve *store.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Import = %+v, %v; want a *ValidationError", res, err)
			}
			if !errors.Is(err, r.rule) {
				t.Errorf("error %q does not wrap %q", err, r.rule)
			}
			var fields []string
			for _, f := range ve.Fields {
				fields = append(fields, f.Field)
			}
			if !strings.Contains(err.Error(), r.field+": ") || !contains(fields, r.field) {
				t.Errorf("error %q (fields %v) does not name %s", err, fields, r.field)
			}
			if res != (store.ImportResult{}) {
				t.Errorf("refused import reports %+v", res)
			}
			if verr := store.Validate(instance, kind, r.delivery()); verr == nil || verr.Error() != err.Error() {
				t.Errorf("Validate = %v, want Import's refusal %v", verr, err)
			}
		})
	}
	// Nothing of any refused batch, not even its watermark or a new instance.
	checkRows(t, s, "nbp-fx", rows(first))
	checkWatermark(t, s, "nbp-fx", "w1")
	names, err := s.Instances(context.Background())
	if err != nil || !cmp.Equal(names, []string{"nbp-fx"}) {
		t.Errorf("Instances = %v, %v; want [nbp-fx]", names, err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func testWatermark(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	checkWatermark(t, s, "nbp-fx", "") // first sync
	mustImport(t, s, "nbp-fx", store.KindSync, Sync("b1", 0, 5, "w1"))
	checkWatermark(t, s, "nbp-fx", "w1")
	// A file import's watermark is ignored.
	mustImport(t, s, "nbp-fx", store.KindFile, Sync("f1", 5, 5, "from-a-file"))
	checkWatermark(t, s, "nbp-fx", "w1")
	// A refused Sync keeps the old watermark.
	bad := Sync("b2", 10, 5, "w2")
	bad.Transactions[0].Date = "2026-02-30"
	if _, err := s.Import(context.Background(), "nbp-fx", store.KindSync, bad); err == nil {
		t.Fatal("Import of a bad date succeeded")
	}
	checkWatermark(t, s, "nbp-fx", "w1")
	// A Sync that returns the watermark it was given keeps it; a new one replaces it.
	mustImport(t, s, "nbp-fx", store.KindSync, Sync("b3", 10, 5, "w1"))
	checkWatermark(t, s, "nbp-fx", "w1")
	mustImport(t, s, "nbp-fx", store.KindSync, Sync("b4", 15, 5, "w4"))
	checkWatermark(t, s, "nbp-fx", "w4")
	checkWatermark(t, s, "other", "")
}

func testIsolation(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	a := mustImport(t, s, "alpha", store.KindSync, Sync("b1", 0, 10, "wa"))
	bb := mustImport(t, s, "beta", store.KindSync, Sync("b1", 0, 10, "wb"))
	if diff := cmp.Diff(a, bb); diff != "" || bb.Duplicate {
		t.Errorf("the same delivery under another instance (-alpha +beta):\n%s", diff)
	}
	checkRows(t, s, "alpha", rows(a))
	checkRows(t, s, "beta", rows(bb))
	checkWatermark(t, s, "alpha", "wa")
	checkWatermark(t, s, "beta", "wb")
	names, err := s.Instances(context.Background())
	if err != nil || !cmp.Equal(names, []string{"alpha", "beta"}) {
		t.Errorf("Instances = %v, %v; want [alpha beta]", names, err)
	}
}

// testInterrupted makes the database unavailable at several points of an
// import's transaction: nothing of the batch is stored, the watermark stays,
// and retrying stores everything exactly once.
func testInterrupted(t *testing.T, b Backend) {
	// 1000 transactions: more than one INSERT per table.
	const n = 1000
	for _, at := range []int{1, 2, 3, 4, 6, 9, 1 << 20} { // 1<<20: before the commit
		t.Run(fmt.Sprintf("step%d", at), func(t *testing.T) {
			s := open(t, b.NewDSN(t))
			before := mustImport(t, s, "nbp-fx", store.KindSync, Sync("b1", 0, 10, "w1"))
			if at == 1<<20 {
				at = countSteps(t, b, n)
			}
			fired := false
			fire := func(step int) error {
				if fired || step != at {
					return nil
				}
				fired = true
				return b.Interrupt(t, s)
			}
			b.SetHook(s, fire)
			res, err := s.Import(context.Background(), "nbp-fx", store.KindSync, Sync("b2", 5, n, "w2"))
			b.SetHook(s, nil)
			if !fired {
				t.Fatalf("the import had fewer than %d steps", at)
			}
			if err == nil {
				t.Fatalf("Import interrupted at step %d succeeded: %+v", at, res)
			}
			checkRows(t, s, "nbp-fx", rows(before))
			checkWatermark(t, s, "nbp-fx", "w1")
			// The caller retries (with backoff): the pool drops dead connections.
			var retried store.ImportResult
			for attempt := 0; ; attempt++ {
				retried, err = s.Import(context.Background(), "nbp-fx", store.KindSync, Sync("b2", 5, n, "w2"))
				if err == nil {
					break
				}
				if attempt == 5 {
					t.Fatalf("retry: %v", err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			// b1 held transactions 0..9 (day 0) and the same warning.
			days := Days(5, n) - 1
			want := store.ImportResult{Transactions: n - 5, Postings: 2 * (n - 5), Balances: days, Prices: days, FxRates: days, IndexReadings: days}
			if diff := cmp.Diff(want, retried); diff != "" {
				t.Errorf("retry (-want +got):\n%s", diff)
			}
			checkRows(t, s, "nbp-fx", rows(before, retried))
			checkWatermark(t, s, "nbp-fx", "w2")
		})
	}
}

// countSteps is the number of steps an import of n transactions takes.
func countSteps(t *testing.T, b Backend, n int) int {
	s := open(t, b.NewDSN(t))
	mustImport(t, s, "nbp-fx", store.KindSync, Sync("b1", 0, 10, "w1"))
	last := 0
	b.SetHook(s, func(step int) error { last = step; return nil })
	mustImport(t, s, "nbp-fx", store.KindSync, Sync("b2", 5, n, "w2"))
	return last
}

func testConcurrent(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	const instances, batches, n = 6, 3, 200
	var wg sync.WaitGroup
	errs := make(chan error, instances*batches)
	for i := range instances {
		wg.Go(func() {
			name := fmt.Sprintf("plugin-%d", i)
			for j := range batches {
				if _, err := s.Import(context.Background(), name, store.KindSync, Sync(fmt.Sprintf("b%d", j), j*n, n, fmt.Sprintf("w%d", j))); err != nil {
					errs <- fmt.Errorf("%s batch %d: %w", name, j, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	all := want(0, batches*n)
	wantRows := rows(all)
	wantRows.Batches = batches
	for i := range instances {
		name := fmt.Sprintf("plugin-%d", i)
		checkRows(t, s, name, wantRows)
		checkWatermark(t, s, name, fmt.Sprintf("w%d", batches-1))
	}
}

func testSyncStatus(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	ctx := context.Background()
	if _, err := s.Status(ctx, "nbp-fx"); !errors.Is(err, store.ErrUnknownInstance) {
		t.Errorf("Status of an unknown instance: %v, want ErrUnknownInstance", err)
	}
	warsaw := time.FixedZone("CET", 3600)
	at := time.Date(2026, 11, 30, 18, 0, 0, 123456789, warsaw)
	next := at.Add(time.Hour)
	token := "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"
	if err := s.RecordSync(ctx, "nbp-fx", store.SyncRecord{At: at, OK: false, Error: "sync: unavailable (bearer " + token + ")", Next: next}); err != nil {
		t.Fatalf("RecordSync: %v", err)
	}
	st, err := s.Status(ctx, "nbp-fx")
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	wantStatus := store.InstanceRecord{LastSync: at, NextSync: next, LastError: "sync: unavailable (bearer [redacted])"}
	if diff := cmp.Diff(wantStatus, st, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("Status after a failed sync (-want +got):\n%s", diff)
	}
	res := mustImport(t, s, "nbp-fx", store.KindSync, Sync("b1", 0, 10, "w1"))
	if err := s.RecordSync(ctx, "nbp-fx", store.SyncRecord{At: next, OK: true}); err != nil {
		t.Fatalf("RecordSync: %v", err)
	}
	st, err = s.Status(ctx, "nbp-fx")
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	wantStatus = store.InstanceRecord{LastSync: next, LastOK: true, Watermark: "w1", Rows: rows(res)}
	if diff := cmp.Diff(wantStatus, st, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("Status after an import (-want +got):\n%s", diff)
	}
	if err := s.RecordSync(ctx, "", store.SyncRecord{At: at}); err == nil {
		t.Error("RecordSync with no instance succeeded")
	}
}

func testReopen(t *testing.T, b Backend) {
	dsn := b.NewDSN(t)
	s, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	res := mustImport(t, s, "nbp-fx", store.KindSync, Sync("b1", 0, 30, "w1"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s = open(t, dsn)
	checkRows(t, s, "nbp-fx", rows(res))
	checkWatermark(t, s, "nbp-fx", "w1")
	versions, err := s.Migrations(context.Background())
	if err != nil || !cmp.Equal(versions, []int{1, 2, 3, 4}) {
		t.Errorf("Migrations = %v, %v; want [1 2 3 4] (each applied once)", versions, err)
	}
	if again := mustImport(t, s, "nbp-fx", store.KindSync, Sync("b1", 0, 30, "w1")); again.Rows() != 0 || !again.Duplicate {
		t.Errorf("the same delivery after reopening: %+v", again)
	}
}

// testExactText stores decimals and text exactly as delivered: no float, no
// trimmed zeros, no collation surprises.
func testExactText(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	d := Sync("b1", 0, 1, "w1")
	tx := d.Transactions[0]
	tx.ValueDate = "2026-01-02"
	tx.Description = "Zakupy – Żabka, ąęść 😀 'quoted' \"double\" ?"
	tx.Postings[0].Amount = "-12345678901234567890.123456789010"
	tx.Postings[1].Amount = "12345678901234567890.123456789010"
	tx.Postings[1].Quantity = "0.000000000000000001"
	mustImport(t, s, "nbp-fx", store.KindSync, d)
	got, err := s.Transaction(context.Background(), "nbp-fx", tx.GetSourceId())
	if err != nil {
		t.Fatalf("Transaction: %v", err)
	}
	if diff := cmp.Diff(tx, got, protocmp.Transform()); diff != "" {
		t.Errorf("read back (-delivered +stored):\n%s", diff)
	}
	if _, err := s.Transaction(context.Background(), "other", tx.GetSourceId()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another instance's transaction: %v, want ErrNotFound", err)
	}
}

// testDeclaredImbalance: an unbalanced transaction the delivery reports
// with an unbalanced_transaction problem (as the SDK's Builder does) is
// stored with that problem, as the contract says; only a hidden one is
// refused (RefusedStoresNothing).
func testDeclaredImbalance(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	d := Sync("b1", 0, 3, "w1")
	d.Transactions[1].Postings[0].Amount = "-0.99"
	d.Problems = append(d.Problems, &connectorv1.IngestProblem{
		Severity: connectorv1.Severity_SEVERITY_ERROR, Code: delivery.ProblemUnbalanced,
		Message: "postings do not balance: 0.11 PLN", SourceId: d.Transactions[1].GetSourceId(),
	})
	res := mustImport(t, s, "nbp-fx", store.KindSync, d)
	if res.Transactions != 3 || res.Problems != 2 {
		t.Errorf("Import = %+v, want 3 transactions and 2 problems", res)
	}
	got, err := s.Transaction(context.Background(), "nbp-fx", d.Transactions[1].GetSourceId())
	if err != nil || got.GetPostings()[0].GetAmount() != "-0.99" {
		t.Errorf("the unbalanced transaction read back: %v, %v", got, err)
	}
}
