package store_test

import (
	"context"
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
		SetHook: store.SetImportHook,
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
