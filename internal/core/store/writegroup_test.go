package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestGroupedWrites: writes that queue while the file is being written are
// committed together, each caller told its own outcome; a write that fails
// fails only its caller, the others of its group stored all the same.
func TestGroupedWrites(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "core.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	// Hold this process's turn to write, so that the writes below queue.
	s.writes <- struct{}{}
	const n = 20
	errBad := errors.New("a write that fails")
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("c%02d", i)
			if i == 7 {
				errs[i] = s.grouped(ctx, func(context.Context, *sql.Tx) error { return errBad })
				return
			}
			errs[i] = s.RecordSync(ctx, name, SyncRecord{At: time.Now(), OK: true, Next: time.Now().Add(time.Hour)})
		})
	}
	// Every write queued before the turn is given back: the first group
	// holds the first few, the second the rest.
	for deadline := time.Now().Add(10 * time.Second); ; {
		s.groups.mu.Lock()
		queued := s.groups.queued
		s.groups.mu.Unlock()
		if queued == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", queued, n)
		}
		time.Sleep(time.Millisecond)
	}
	<-s.writes
	wg.Wait()
	for i, err := range errs {
		switch {
		case i == 7 && !errors.Is(err, errBad):
			t.Errorf("the failing write returned %v", err)
		case i != 7 && err != nil:
			t.Errorf("write %d: %v", i, err)
		}
	}
	for i := range n {
		if i == 7 {
			continue
		}
		st, err := s.Status(ctx, fmt.Sprintf("c%02d", i))
		if err != nil || !st.LastOK {
			t.Errorf("c%02d: %+v, %v: its record was not stored", i, st, err)
		}
	}
}

// TestGroupedWriteCanceled: a write whose caller's context ended before its
// group ran is not written, its caller told why, and the store goes on
// committing the others.
func TestGroupedWriteCanceled(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "core.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	s.writes <- struct{}{}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() { got <- s.RecordSync(ctx, "gone", SyncRecord{At: time.Now(), OK: true}) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.groups.mu.Lock()
		leading := s.groups.leading
		s.groups.mu.Unlock()
		if leading {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the write never queued")
		}
	}
	cancel()
	<-s.writes
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("RecordSync with its context ended: %v", err)
	}
	if _, err := s.Status(context.Background(), "gone"); !errors.Is(err, ErrUnknownInstance) {
		t.Errorf("the canceled write was stored: %v", err)
	}
	if err := s.RecordSync(context.Background(), "next", SyncRecord{At: time.Now(), OK: true}); err != nil {
		t.Fatalf("the next write: %v", err)
	}
}
