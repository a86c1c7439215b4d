package testutil

import (
	"runtime/metrics"
	"sync"
	"time"
)

// heapObjects is the runtime's count of bytes in heap objects, live or not
// yet swept: what a burst of allocation adds to the process.
const heapObjects = "/memory/classes/heap/objects:bytes"

// ReadHeap returns the bytes in heap objects now.
func ReadHeap() uint64 {
	s := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// PeakHeap samples the heap every interval until stop is called, which
// returns the highest value seen. Benchmarks report it above an idle heap
// read before.
func PeakHeap(every time.Duration) (stop func() uint64) {
	var mu sync.Mutex
	peak := ReadHeap()
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if h := ReadHeap(); h > peak {
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
		return max(peak, ReadHeap())
	}
}
