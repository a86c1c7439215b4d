package core

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/testutil"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// largestTransaction is a delivery of one transaction as large as a
// connector holding accounts may deliver in one answer: 1,000 postings
// (MaxPostings) whose account ID and memo are long strings (4,096 and 3,000
// bytes), about 7 MB.
func largestTransaction(batch, sourceID string) *connectorv1.Delivery {
	memo := strings.Repeat("m", 4096)
	account := strings.Repeat("a", 3000-8)
	tx := &connectorv1.Transaction{SourceId: sourceID, Date: "2026-03-01", Payee: strings.Repeat("p", 4096)}
	for i := range 1000 {
		amount := "1"
		if i%2 == 1 {
			amount = "-1"
		}
		tx.Postings = append(tx.Postings, &connectorv1.Posting{AccountId: fmt.Sprintf("%s%08d", account, i), Amount: amount, Currency: "PLN", Memo: memo})
	}
	return &connectorv1.Delivery{BatchId: batch, Institution: &connectorv1.Institution{Id: "bank"}, Transactions: []*connectorv1.Transaction{tx}}
}

// BenchmarkExportBehindLargeTransactions exports to a view that is behind
// 100 of the largest transactions a connector may deliver (about 700 MB of
// text in a SQLite store) with the core's default page bounds, and reports
// the process's heap when idle (after a collection, the store and the view
// set up) and at its peak while the pages are exported, in MiB. The view
// on loopback reads each request and drops it, so the figure is the
// core's. It fails above 64 MiB over the idle heap.
//
//	go test ./internal/core -run XXX -bench ExportBehindLargeTransactions -benchtime 1x
func BenchmarkExportBehindLargeTransactions(b *testing.B) {
	const transactions = 100
	st, err := store.Open(b.Context(), filepath.Join(b.TempDir(), "core.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	for i := range transactions {
		if _, err := st.Import(b.Context(), "bank", store.KindSync, largestTransaction(fmt.Sprintf("b%d", i), fmt.Sprintf("tx-%03d", i))); err != nil {
			b.Fatal(err)
		}
	}
	url := serveHostile(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/proto")
		w.WriteHeader(http.StatusOK) // an empty ExportResponse
	}))
	x := &Exporter{
		Store:  st,
		Caller: &Caller{Tokens: testTokens{}, Resolve: func(string) string { return url }},
		Tiers:  func(context.Context, string) ([]string, error) { return []string{TierAccounts}, nil },
	}
	ctx := b.Context()
	var worst uint64
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		if err := st.ResetView(ctx, "csv"); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.GC()
		idle := testutil.ReadHeap()
		stop := testutil.PeakHeap(100 * time.Microsecond)
		b.StartTimer()
		res, err := x.Run(ctx, "csv", "run")
		b.StopTimer()
		peak := stop()
		if err != nil || res.Entries != transactions {
			b.Fatalf("exported %+v: %v", res, err)
		}
		worst = max(worst, peak-min(idle, peak))
		const mib = 1 << 20
		b.ReportMetric(float64(idle)/mib, "idle-heap-MiB")
		b.ReportMetric(float64(peak)/mib, "peak-heap-MiB")
		b.ReportMetric(float64(res.Pages), "pages")
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(worst)/(1<<20), "MiB-above-idle")
	if worst > 64<<20 {
		b.Errorf("the export took %.1f MiB above the idle heap, more than 64 MiB", float64(worst)/(1<<20))
	}
}
