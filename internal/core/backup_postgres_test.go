//go:build heavy

package core

import (
	"context"
	"testing"

	"github.com/arkadiuss/openfief/internal/core/store/pgtest"
)

// TestRestoredCoreContinuesPostgres is TestRestoredCoreContinues on a real
// PostgreSQL server: the backup is a REPEATABLE READ snapshot taken while
// the six connectors import and the view exports.
func TestRestoredCoreContinuesPostgres(t *testing.T) {
	srv, err := pgtest.Start(context.Background())
	if err != nil {
		t.Fatalf("PostgreSQL cannot start here (make test-deps installs it): %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	testContinuation(t, func(t *testing.T) string {
		dsn, err := srv.NewDatabase(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return dsn
	})
}
