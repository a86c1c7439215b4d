//go:build heavy

package store_test

import (
	"context"
	"fmt"
	"os"

	"github.com/arkadiuss/openfief/internal/core/store/pgtest"
)

// pg is the PostgreSQL server of this test binary, or nil with pgSkip
// saying why it could not start.
var (
	pg     *pgtest.Server
	pgSkip string
)

func init() {
	startPostgres = func() (stop func()) {
		srv, err := pgtest.Start(context.Background())
		if err != nil {
			pgSkip = fmt.Sprintf("PostgreSQL cannot start here: %v", err)
		}
		pg = srv
		return func() {
			if pg != nil {
				if err := pg.Stop(); err != nil {
					fmt.Fprintf(os.Stderr, "stop PostgreSQL: %v\n", err)
				}
			}
		}
	}
}
