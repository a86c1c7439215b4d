//go:build heavy

package store_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/core/store/storetest"
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
