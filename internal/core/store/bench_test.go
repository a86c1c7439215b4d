//go:build heavy

package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
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

// BenchmarkImportVsRaw sets the store's import of BenchmarkImport10k's
// delivery beside the raw floor of the same rows (store.RawImport: one COPY
// per table on PostgreSQL, a plain prepared INSERT per row on SQLite, one
// transaction), each into its own new database of the same schema. Every
// iteration stores one delivery both ways under a new instance, in
// alternating order, so both record grow alike and a burst of load falls on
// both; store/raw is the median over iterations of the store's throughput
// over the raw one (raw time over store time). `make bench-core` runs it.
func BenchmarkImportVsRaw(b *testing.B) {
	const n = 10_000
	d := storetest.Sync("bench", 0, n, "w")
	for _, be := range benchBackends() {
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := store.Open(ctx, be.dsn(b))
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			raw, err := store.Open(ctx, be.dsn(b))
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = raw.Close() }()
			var ratios []float64
			var storeTook, rawTook time.Duration
			rows := 0
			for b.Loop() {
				i := len(ratios)
				name := fmt.Sprintf("bench-%d", i)
				importStore := func() time.Duration {
					start := time.Now()
					res, err := s.Import(ctx, name, store.KindSync, d)
					if err != nil {
						b.Fatal(err)
					}
					rows = res.Rows()
					return time.Since(start)
				}
				rawRows := 0
				importRaw := func() time.Duration {
					start := time.Now()
					if rawRows, err = store.RawImport(ctx, raw, name, d); err != nil {
						b.Fatal(err)
					}
					return time.Since(start)
				}
				var st, rt time.Duration
				if i%2 == 0 {
					st, rt = importStore(), importRaw()
				} else {
					rt, st = importRaw(), importStore()
				}
				if rawRows != rows {
					b.Fatalf("the store stored %d rows, the raw floor %d", rows, rawRows)
				}
				storeTook += st
				rawTook += rt
				ratios = append(ratios, rt.Seconds()/st.Seconds())
			}
			k := float64(len(ratios))
			b.ReportMetric(k*float64(rows)/storeTook.Seconds(), "store-rows/s")
			b.ReportMetric(k*float64(rows)/rawTook.Seconds(), "raw-rows/s")
			b.ReportMetric(median(ratios), "store/raw")
			b.ReportMetric(slices.Min(ratios), "store/raw-min")
		})
	}
}

// median is the middle of xs (the mean of the two middle ones).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
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
