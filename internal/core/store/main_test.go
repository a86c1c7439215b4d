package store_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/core/store/pgtest"
)

// pg is the PostgreSQL server of this test binary, or nil with pgSkip
// saying why it could not start.
var (
	pg     *pgtest.Server
	pgSkip string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if needsPostgres() {
		srv, err := pgtest.Start(context.Background())
		if err != nil {
			pgSkip = fmt.Sprintf("PostgreSQL cannot start here: %v", err)
		}
		pg = srv
		defer func() {
			if pg != nil {
				if err := pg.Stop(); err != nil {
					fmt.Fprintf(os.Stderr, "stop PostgreSQL: %v\n", err)
				}
			}
		}()
	}
	return m.Run()
}

// needsPostgres is false for a fuzz run, a listing (make fuzz does both)
// and the SQLite crash test's child: they start no server.
func needsPostgres() bool {
	if os.Getenv(crashEnv) != "" {
		return false // the SQLite crash test's child
	}
	for _, a := range os.Args[1:] {
		if a == "-test.fuzz" || strings.HasPrefix(a, "-test.fuzz=") || strings.HasPrefix(a, "-test.fuzzworker") || strings.HasPrefix(a, "-test.list") {
			return false
		}
	}
	return true
}
