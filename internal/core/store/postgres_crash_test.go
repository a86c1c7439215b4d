//go:build heavy

package store_test

import (
	"context"
	"testing"

	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/core/store/storetest"
)

// TestPostgresServerCrash stops the server immediately (no checkpoint,
// connections cut) in the middle of an import's transaction and starts it
// again through crash recovery: nothing of the batch is there, and the
// retry stores everything once. It runs alone, before the parallel tests
// that share the server.
func TestPostgresServerCrash(t *testing.T) {
	if pg == nil {
		t.Skip(pgSkip)
	}
	// The steps are the same on both databases: 500 rows per statement.
	for name, at := range map[string]int{"mid-batch": 5, "before-commit": importSteps(t)} {
		t.Run(name, func(t *testing.T) {
			dsn, err := pg.NewDatabase(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			s, err := store.Open(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			before, err := s.Import(context.Background(), "nbp-fx", store.KindSync, storetest.Sync("b1", 0, 10, "w1"))
			if err != nil {
				t.Fatal(err)
			}
			crashed := false
			store.SetImportHook(s, func(step int) error {
				if step == at && !crashed {
					crashed = true
					if err := pg.Crash(); err != nil {
						t.Errorf("crash the server: %v", err)
					}
				}
				return nil
			})
			if _, err := s.Import(context.Background(), "nbp-fx", store.KindSync, crashBatch()); err == nil {
				t.Fatal("the import succeeded while the server was down")
			}
			store.SetImportHook(s, nil)
			if !crashed {
				t.Fatal("the hook never ran")
			}
			if err := pg.Restart(context.Background()); err != nil {
				t.Fatalf("restart the server: %v", err)
			}
			checkCounts(t, s, "nbp-fx", before)
			retryImport(t, s)
		})
	}
}
