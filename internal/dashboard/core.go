package dashboard

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
)

// CoreStatusFunc reads what openfief-core recorded of every instance it
// knows, removed ones included: its owner API's status (ownerapi.PathStatus).
// The CLI supplies it, with its own transport and the owner's token, so the
// dashboard knows neither. Its error must never hold a credential; the page
// shows it.
type CoreStatusFunc func(ctx context.Context) ([]ownerapi.InstanceStatus, error)

// Bounds of the core poll: the core offers no watch, so the dashboard asks
// again every DefaultCoreInterval, each question bounded by coreTimeout; a
// poll never overlaps the next.
const (
	DefaultCoreInterval = 5 * time.Second
	coreTimeout         = 10 * time.Second
)

// coreState is the core's last answer as the pages show it: not asked yet,
// an error, or the instances' statuses.
type coreState struct {
	// configured is false when the dashboard has no CoreStatusFunc: the
	// pages then say nothing of the core.
	configured bool
	// answered is true once a poll ended, with an answer or an error.
	answered bool
	// err is why the last poll got no answer, "" when it got one.
	err string
	// statuses is the last answer; nil after an error.
	statuses []ownerapi.InstanceStatus
}

// corePoll asks the core for its status on an interval and wakes the pages
// whenever the answer differs from the one before.
type corePoll struct {
	read     CoreStatusFunc
	interval time.Duration
	notify   func()

	mu    sync.Mutex
	state coreState
}

func newCorePoll(read CoreStatusFunc, interval time.Duration, notify func()) *corePoll {
	if interval <= 0 {
		interval = DefaultCoreInterval
	}
	return &corePoll{read: read, interval: interval, notify: notify, state: coreState{configured: read != nil}}
}

// run polls until ctx ends; nothing when there is no reader.
func (p *corePoll) run(ctx context.Context) {
	if p.read == nil {
		return
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.poll(ctx)
		t.Reset(p.interval)
	}
}

// poll asks once, bounded by coreTimeout, and keeps the answer.
func (p *corePoll) poll(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, coreTimeout)
	statuses, err := p.read(qctx)
	cancel()
	if ctx.Err() != nil {
		return // stopping: the page is gone, and this is no answer of the core's
	}
	next := coreState{configured: true, answered: true, statuses: statuses}
	if err != nil {
		next.err, next.statuses = err.Error(), nil
	}
	p.mu.Lock()
	changed := !reflect.DeepEqual(p.state, next)
	p.state = next
	p.mu.Unlock()
	if changed {
		p.notify()
	}
}

// current is the last answer.
func (p *corePoll) current() coreState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}
