package testutil

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds, and fails the test if it does not
// within the given time, naming what it waited for and the state cond last
// reported. It polls every 10 ms at first and backs off to every 200 ms, so
// a fast condition is seen at once and a slow one does not load the API
// server.
func Eventually(t testing.TB, within time.Duration, what string, cond func() (ok bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	wait, last := 10*time.Millisecond, ""
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last seen: %s", within, what, last)
		}
		time.Sleep(wait)
		wait = min(2*wait, 200*time.Millisecond)
	}
}
