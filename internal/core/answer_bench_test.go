package core

import (
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// heapObjects is the runtime's count of bytes in heap objects, live or not
// yet swept: what a burst of allocation adds to the process.
const heapObjects = "/memory/classes/heap/objects:bytes"

func readHeap() uint64 {
	s := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// peakHeap samples the heap every 100 µs until stop is called, which
// returns the highest value seen.
func peakHeap() (stop func() uint64) {
	var mu sync.Mutex
	peak := readHeap()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Microsecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if h := readHeap(); h > peak {
					mu.Lock()
					peak = h
					mu.Unlock()
				}
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		mu.Lock()
		defer mu.Unlock()
		return max(peak, readHeap())
	}
}

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
			idle := readHeap()
			stop := peakHeap()
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
