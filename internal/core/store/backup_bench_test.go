//go:build heavy

package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/core/store/storetest"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// BenchmarkBackupRestore backs up a record of OPENFIEF_BENCH_ENTRIES
// entries (default 1,000,000: transactions, with their two postings each,
// and the balances, prices, FX rates and index readings of their days) to a
// file and restores it into a new database, on SQLite and on PostgreSQL,
// and reports each one's time and the process's peak heap above the idle
// heap: a backup and a restore hold a row and their buffers, never the
// record, so the peak stays flat as the record grows. `make bench-backup`
// runs it.
func BenchmarkBackupRestore(b *testing.B) {
	entries := 1_000_000
	if v := os.Getenv("OPENFIEF_BENCH_ENTRIES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 14_000 {
			b.Fatalf("OPENFIEF_BENCH_ENTRIES=%q: want a number of at least 14000", v)
		}
		entries = n
	}
	backends := benchBackends()
	// Each delivery is 10,000 transactions and 4,000 other entries.
	const perDelivery = 10_000
	deliveries := entries / (perDelivery * 14 / 10)
	d := storetest.Sync("bench", 0, perDelivery, "w")
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			src, err := store.Open(ctx, be.dsn(b))
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = src.Close() }()
			for i := range deliveries {
				if _, err := src.Import(ctx, fmt.Sprintf("bench-%d", i), store.KindSync, d); err != nil {
					b.Fatal(err)
				}
			}
			file := filepath.Join(b.TempDir(), "record.backup.gz")
			for b.Loop() {
				b.StopTimer()
				f, err := os.Create(file)
				if err != nil {
					b.Fatal(err)
				}
				idle, peak := heapIdle(), testutil.PeakHeap(time.Millisecond)
				start := time.Now()
				res, err := src.Backup(ctx, f, store.BackupOptions{})
				backupTook, backupPeak := time.Since(start), peak()
				if err != nil {
					b.Fatal(err)
				}
				info, _ := f.Stat()
				_ = f.Close()
				dst, err := store.Open(ctx, be.dsn(b))
				if err != nil {
					b.Fatal(err)
				}
				f, err = os.Open(file)
				if err != nil {
					b.Fatal(err)
				}
				idle2, peak2 := heapIdle(), testutil.PeakHeap(time.Millisecond)
				start = time.Now()
				got, err := dst.Restore(ctx, f, store.RestoreOptions{})
				restoreTook, restorePeak := time.Since(start), peak2()
				_ = f.Close()
				_ = dst.Close()
				if err != nil {
					b.Fatal(err)
				}
				var n, rows int64
				for _, k := range store.EntryKinds {
					n += res.Rows[string(k)]
				}
				for _, r := range got.Rows {
					rows += r
				}
				const mib = 1 << 20
				b.ReportMetric(float64(n), "entries")
				b.ReportMetric(float64(rows), "rows")
				b.ReportMetric(float64(info.Size())/mib, "backup-MiB")
				b.ReportMetric(backupTook.Seconds(), "backup-s")
				b.ReportMetric(restoreTook.Seconds(), "restore-s")
				b.ReportMetric(float64(backupPeak-min(idle, backupPeak))/mib, "backup-peak-MiB-above-idle")
				b.ReportMetric(float64(restorePeak-min(idle2, restorePeak))/mib, "restore-peak-MiB-above-idle")
				b.StartTimer()
			}
		})
	}
}

// heapIdle is the heap after two collections.
func heapIdle() uint64 {
	runtime.GC()
	runtime.GC()
	return testutil.ReadHeap()
}
