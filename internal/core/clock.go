package core

import "time"

// Clock is the time the scheduler runs on; tests replace it.
type Clock interface {
	Now() time.Time
	// After delivers once d has passed.
	After(d time.Duration) <-chan time.Time
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
