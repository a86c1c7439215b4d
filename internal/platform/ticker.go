package platform

import (
	"context"
	"time"
)

// requestTimeout bounds the requests made after the command's own deadline
// passed (to say why a wait ran out).
const requestTimeout = 30 * time.Second

// ticker paces the command's polling loops.
type ticker struct{ t *time.Ticker }

func newTicker() ticker { return ticker{time.NewTicker(pollInterval)} }

// wait returns at the next tick, or ctx's error once it is done.
func (t ticker) wait(ctx context.Context) error {
	select {
	case <-t.t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t ticker) stop() { t.t.Stop() }
