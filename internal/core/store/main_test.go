package store_test

import (
	"os"
	"strings"
	"testing"
)

// startPostgres starts the binary's PostgreSQL server and returns what
// stops it. Only the heavy build sets it (postgres_main_test.go): a plain
// go test starts no server, and the PostgreSQL tests are not in it.
var startPostgres func() (stop func())

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if startPostgres != nil && needsPostgres() {
		defer startPostgres()()
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
