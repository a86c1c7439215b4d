package core

import (
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/testutil"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// BenchmarkHostileAnswer calls hostile plugins on loopback with the core's
// default bounds and reports the process's heap when idle (after a
// collection, the servers and the caller set up) and at its peak during the
// calls, in MiB. The 300 MiB answers are what a hostile plugin could send
// before the bounds; the empty transactions fill the byte bound with what
// decodes largest (refused by the memory bound); the ordinary transactions
// are the largest answer the core accepts, for comparison.
//
//	go test ./internal/core -run XXX -bench HostileAnswer -benchtime 3x
func BenchmarkHostileAnswer(b *testing.B) {
	for _, bc := range []struct {
		name string
		h    http.Handler
		sync bool
	}{
		{"Sync-300MiB-junk", junkAnswer(300<<20, nil), true},
		{"ImportFile-300MiB-envelope", hugeEnvelope(300 << 20), false},
		{"Sync-8MiB-empty-transactions", fixedAnswer(emptyTransactions("b1", DefaultMaxAnswerBytes/2-64)), true},
		{"Sync-8MiB-ordinary-accepted", fixedAnswer(ordinaryAnswer("b1", DefaultMaxAnswerBytes)), true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			url := serveHostile(b, bc.h)
			c := &Caller{Tokens: testTokens{}, Resolve: func(string) string { return url }}
			ctx := b.Context()
			runtime.GC()
			runtime.GC()
			idle := testutil.ReadHeap()
			stop := testutil.PeakHeap(100 * time.Microsecond)
			b.ResetTimer()
			for b.Loop() {
				var err error
				if bc.sync {
					_, err = c.Sync(ctx, "evil", &connectorv1.SyncRequest{BatchId: "b1"})
				} else {
					_, err = c.ImportFile(ctx, "evil", &connectorv1.FileHeader{BatchId: "b1"}, strings.NewReader("x"))
				}
				if accepted := err == nil; accepted != strings.HasSuffix(bc.name, "-accepted") {
					b.Fatalf("accepted %v: %v", accepted, err)
				}
			}
			b.StopTimer()
			peak := stop()
			const mib = 1 << 20
			b.ReportMetric(float64(idle)/mib, "idle-heap-MiB")
			b.ReportMetric(float64(peak)/mib, "peak-heap-MiB")
			b.ReportMetric(float64(peak-idle)/mib, "MiB-above-idle")
		})
	}
}
