//go:build heavy

package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/core/store/storetest"
)

// BenchmarkImport10k stores a 10,000-transaction Sync delivery (20,000
// postings, 1,000 each of balances, prices, FX rates and index readings) as
// one batch, on SQLite and on PostgreSQL side by side. Every iteration is a
// new instance, so every row is new. `make bench-core` runs it.
func BenchmarkImport10k(b *testing.B) {
	backends := benchBackends()
	const n = 10_000
	d := storetest.Sync("bench", 0, n, "w")
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := store.Open(ctx, be.dsn(b))
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			rows, i := 0, 0
			start := time.Now()
			for b.Loop() {
				res, err := s.Import(ctx, fmt.Sprintf("bench-%d", i), store.KindSync, d)
				if err != nil {
					b.Fatal(err)
				}
				if res.Transactions != n {
					b.Fatalf("stored %d transactions, want %d", res.Transactions, n)
				}
				rows += res.Rows()
				i++
			}
			secs := time.Since(start).Seconds()
			b.ReportMetric(float64(i)/secs, "deliveries/s")
			b.ReportMetric(float64(i*n)/secs, "transactions/s")
			b.ReportMetric(float64(rows)/secs, "rows/s")
		})
	}
}

// benchBackend is a database the store's benchmarks run on, side by side.
type benchBackend struct {
	name string
	dsn  func(b *testing.B) string
}

// benchBackends are SQLite in a temporary folder and PostgreSQL (skipped
// where pgtest found no server), each a new database per call of dsn.
func benchBackends() []benchBackend {
	return []benchBackend{
		{"sqlite", func(b *testing.B) string { return "sqlite:" + filepath.Join(b.TempDir(), "core.db") }},
		{"postgres", func(b *testing.B) string {
			if pg == nil {
				b.Skip(pgSkip)
			}
			dsn, err := pg.NewDatabase(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			return dsn
		}},
	}
}
