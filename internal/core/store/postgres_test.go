//go:build heavy

package store_test

import (
	"context"
	"strings"
	"testing"

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
