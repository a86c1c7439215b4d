//go:build cluster

package devcluster_test

import (
	"slices"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// BenchmarkStart measures how long each mode takes to start, reporting the
// median as well as the mean. Use a fixed count, e.g.
//
//	go test -run '^$' -bench Start -benchtime 5x ./internal/devcluster/
func BenchmarkStart(b *testing.B) {
	for _, mode := range []devcluster.Mode{devcluster.Minimal, devcluster.Full} {
		b.Run(mode.String(), func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				began := time.Now()
				c, err := devcluster.Start(b.Context(), devcluster.Options{Mode: mode})
				if err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(began))
				b.StopTimer()
				if err := c.Stop(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			slices.Sort(took)
			b.ReportMetric(took[len(took)/2].Seconds(), "median-s/start")
			b.Logf("%v start times: %v", mode, took)
		})
	}
}
