//go:build heavy

package store_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/core/store/storetest"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// postgresBackend gives every test its own database on the binary's server;
// an interruption terminates the server's client connections mid-transaction.
func postgresBackend(t testing.TB) storetest.Backend {
	if pg == nil {
		t.Skip(pgSkip)
	}
	return storetest.Backend{
		NewDSN: func(t *testing.T) string {
			dsn, err := pg.NewDatabase(context.Background())
			if err != nil {
				t.Fatalf("new database: %v", err)
			}
			return dsn
		},
		SetHook:       store.SetImportHook,
		Loaded:        store.LoadedBytes,
		OpenAt:        store.OpenAt,
		Exec:          store.Exec,
		Dump:          store.DumpTables,
		SetBackupHook: store.SetBackupHook,
		TableNames:    store.TableNames,
		BackupTables:  store.BackupTables,
		Interrupt: func(t *testing.T, _ *store.Store) error {
			if err := pg.TerminateBackends(context.Background()); err != nil {
				t.Fatalf("terminate backends: %v", err)
			}
			return nil
		},
	}
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	storetest.Run(t, postgresBackend(t))
}

// TestPostgresPasswordFromEnvironment: the deployment docs' way to give the
// core a password, PGPASSWORD beside a DSN without one, works; a wrong
// password is refused without showing it.
func TestPostgresPasswordFromEnvironment(t *testing.T) {
	if pg == nil {
		t.Skip(pgSkip)
	}
	const password = "correct-horse-battery"
	dsn, err := pg.PasswordRole(context.Background(), "core_pw", password)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGPASSWORD", "wrong-"+password)
	if _, err := store.Open(context.Background(), dsn); err == nil || strings.Contains(err.Error(), password) {
		t.Fatalf("Open with a wrong password = %v; want a refusal that does not show it", err)
	}
	t.Setenv("PGPASSWORD", password)
	s, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("Open with PGPASSWORD: %v", err)
	}
	defer func() { _ = s.Close() }()
	if _, err := s.Import(context.Background(), "nbp-fx", store.KindSync, storetest.Sync("b1", 0, 5, "w1")); err != nil {
		t.Fatalf("Import as the password role: %v", err)
	}
}

// TestBackupAcrossDatabases: a backup of a SQLite record restores into
// PostgreSQL, and one of that PostgreSQL record back into SQLite, every
// table the same.
func TestBackupAcrossDatabases(t *testing.T) {
	if pg == nil {
		t.Skip(pgSkip)
	}
	ctx := context.Background()
	sq, err := store.Open(ctx, "sqlite:"+t.TempDir()+"/core.db")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sq.Close() }()
	storetest.Populate(t, sq)
	dsn, err := pg.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pgs, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pgs.Close() }()
	var raw bytes.Buffer
	if _, err := sq.Backup(ctx, &raw, store.BackupOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pgs.Restore(ctx, &raw, store.RestoreOptions{}); err != nil {
		t.Fatalf("SQLite's backup into PostgreSQL: %v", err)
	}
	want, err := store.DumpTables(ctx, sq)
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.DumpTables(ctx, pgs)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PostgreSQL restored from SQLite (-SQLite +PostgreSQL):\n%s", diff)
	}
	back, err := store.Open(ctx, "sqlite:"+t.TempDir()+"/back.db")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = back.Close() }()
	raw.Reset()
	if _, err := pgs.Backup(ctx, &raw, store.BackupOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := back.Restore(ctx, &raw, store.RestoreOptions{}); err != nil {
		t.Fatalf("PostgreSQL's backup into SQLite: %v", err)
	}
	if got, err = store.DumpTables(ctx, back); err != nil || !cmp.Equal(want, got) {
		t.Errorf("SQLite restored from PostgreSQL differs (%v):\n%s", err, cmp.Diff(want, got))
	}
}

// TestPostgresCopyStoresWhatInsertsStore: PostgreSQL copies a delivery's
// transactions and postings where SQLite inserts them; the same deliveries
// (new, overlapping, repeated, with postings of old transactions changed)
// leave the same rows, entry numbers and counters in both.
func TestPostgresCopyStoresWhatInsertsStore(t *testing.T) {
	if pg == nil {
		t.Skip(pgSkip)
	}
	ctx := context.Background()
	dsn, err := pg.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pgs, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pgs.Close() }()
	sq, err := store.Open(ctx, "sqlite:"+t.TempDir()+"/core.db")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sq.Close() }()
	changed := storetest.Sync("b3", 10, 40, "w3")
	for _, tx := range changed.Transactions[:10] { // stored by b1 already: the first version stays
		tx.Description = "changed"
		tx.Postings[0].Memo = "changed"
	}
	// Keys repeated within the delivery, the second version different: the
	// first one in the delivery is kept.
	again := func(b *connectorv1.BalanceAssertion, p *connectorv1.Price, r *connectorv1.FxRate, x *connectorv1.IndexReading) {
		changed.BalanceAssertions = append(changed.BalanceAssertions, &connectorv1.BalanceAssertion{AccountId: b.AccountId, Date: b.Date, Amount: "1.00", Currency: b.Currency})
		changed.Prices = append(changed.Prices, &connectorv1.Price{Instrument: p.Instrument, Date: p.Date, Price: "1.0000", Currency: p.Currency})
		changed.FxRates = append(changed.FxRates, &connectorv1.FxRate{Date: r.Date, BaseCurrency: r.BaseCurrency, QuoteCurrency: r.QuoteCurrency, Rate: "1.0000"})
		changed.IndexReadings = append(changed.IndexReadings, &connectorv1.IndexReading{IndexId: x.IndexId, Date: x.Date, Value: "1.0"})
	}
	again(changed.BalanceAssertions[0], changed.Prices[0], changed.FxRates[0], changed.IndexReadings[0]) // stored by b1 too
	last := len(changed.Prices) - 2
	again(changed.BalanceAssertions[last], changed.Prices[last], changed.FxRates[last], changed.IndexReadings[last]) // new
	changed.Problems = append(changed.Problems, changed.Problems[0], &connectorv1.IngestProblem{
		Severity: connectorv1.Severity_SEVERITY_ERROR, Code: "other", Message: "new",
	})
	deliveries := []struct {
		instance string
		kind     store.Kind
		d        *connectorv1.Delivery
	}{
		{"nbp-fx", store.KindSync, storetest.Sync("b1", 0, 20, "w1")},
		{"nbp-fx", store.KindSync, storetest.Sync("b2", 15, 20, "w2")},
		{"nbp-fx", store.KindSync, storetest.Sync("b1", 0, 20, "w1")},
		{"nbp-fx", store.KindFile, changed},
		{"other", store.KindSync, storetest.Sync("b1", 5, 700, "w1")},
		{"nbp-fx", store.KindSync, storetest.Sync("b4", 0, 0, "w4")},
	}
	for i, c := range deliveries {
		a, err := sq.Import(ctx, c.instance, c.kind, c.d)
		if err != nil {
			t.Fatalf("delivery %d into SQLite: %v", i, err)
		}
		b, err := pgs.Import(ctx, c.instance, c.kind, c.d)
		if err != nil {
			t.Fatalf("delivery %d into PostgreSQL: %v", i, err)
		}
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("delivery %d: ImportResult (-SQLite +PostgreSQL):\n%s", i, diff)
		}
	}
	want, err := store.DumpTables(ctx, sq)
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.DumpTables(ctx, pgs)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the record (-SQLite +PostgreSQL):\n%s", diff)
	}
}

// TestPostgresCopyMeetsAnotherWriter: a transaction of the delivery is
// stored by another connection at each point of the import in turn,
// including between the lookup of stored transactions and the COPY (which
// then fails on the duplicate key and the import falls back to INSERTs in
// the same transaction). Every time the import succeeds, keeps the other
// writer's version, and stores everything else once.
func TestPostgresCopyMeetsAnotherWriter(t *testing.T) {
	if pg == nil {
		t.Skip(pgSkip)
	}
	ctx := context.Background()
	const n = 300
	// Steps 1 to 6 run to the COPY of the transactions (the sixth); later,
	// the other writer would wait for the import, which waits for it.
	for at := 1; at <= 6; at++ {
		t.Run(fmt.Sprintf("step%d", at), func(t *testing.T) {
			dsn, err := pg.NewDatabase(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s, err := store.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			if _, err := s.Import(ctx, "nbp-fx", store.KindSync, storetest.Sync("b1", 0, 10, "w1")); err != nil {
				t.Fatal(err)
			}
			other := storetest.SourceID(100)
			store.SetImportHook(s, func(step int) error {
				if step != at {
					return nil
				}
				ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				if err := store.Exec(ctx, s, `INSERT INTO batches (instance, batch_id, kind, institution_id, institution_name, watermark) VALUES ('nbp-fx', 'elsewhere', 'file', '', '', '')`); err != nil {
					return err
				}
				return store.Exec(ctx, s, `INSERT INTO transactions (instance, source_id, batch_id, date, value_date, description, payee, seq) VALUES ('nbp-fx', ?, 'elsewhere', '2026-01-01', '', 'elsewhere', '', 0)`, other)
			})
			res, err := s.Import(ctx, "nbp-fx", store.KindSync, storetest.Sync("b2", 10, n, "w2"))
			store.SetImportHook(s, nil)
			if err != nil {
				t.Fatalf("Import: %v", err)
			}
			if res.Transactions != n-1 || res.Postings != 2*(n-1) {
				t.Errorf("Import = %+v, want %d transactions and %d postings", res, n-1, 2*(n-1))
			}
			got, err := s.Transaction(ctx, "nbp-fx", other)
			if err != nil || got.GetDescription() != "elsewhere" || len(got.GetPostings()) != 0 {
				t.Errorf("the other writer's transaction: %v, %v; want its own version, no postings", got, err)
			}
			for _, i := range []int{10, 99, 101, n + 9} {
				if got, err := s.Transaction(ctx, "nbp-fx", storetest.SourceID(i)); err != nil || len(got.GetPostings()) != 2 {
					t.Errorf("transaction %d: %v, %v; want it with 2 postings", i, got, err)
				}
			}
		})
	}
}
