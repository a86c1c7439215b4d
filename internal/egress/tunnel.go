package egress

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// tunnels counts and tracks the proxy's tunnels: caps them per plugin and in
// total, and closes those whose host leaves their plugin's allow-list.
type tunnels struct {
	maxPerPlugin, max int
	metrics           *Metrics

	mu        sync.Mutex
	perPlugin map[string]int
	total     int
	open      map[*tunnel]struct{}
	shut      bool
	done      sync.WaitGroup
}

func newTunnels(maxPerPlugin, maxTotal int, m *Metrics) *tunnels {
	return &tunnels{
		maxPerPlugin: maxPerPlugin,
		max:          maxTotal,
		metrics:      m,
		perPlugin:    map[string]int{},
		open:         map[*tunnel]struct{}{},
	}
}

// reserve takes a slot for a tunnel of plugin to target before anything is
// resolved or dialled, so the caps also bound tunnels being set up.
func (ts *tunnels) reserve(plugin, target string) (*tunnel, *denial) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.perPlugin[plugin] >= ts.maxPerPlugin {
		return nil, deny(http.StatusTooManyRequests, ReasonPluginLimit)
	}
	if ts.total >= ts.max {
		return nil, deny(http.StatusServiceUnavailable, ReasonTunnelLimit)
	}
	ts.perPlugin[plugin]++
	ts.total++
	ts.done.Add(1)
	return &tunnel{plugin: plugin, target: target}, nil
}

// release gives back t's slot; t must be closed or never attached.
func (ts *tunnels) release(t *tunnel) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.open, t)
	if ts.perPlugin[t.plugin]--; ts.perPlugin[t.plugin] <= 0 {
		delete(ts.perPlugin, t.plugin)
	}
	ts.total--
	ts.done.Done()
}

// attach records t's connections and makes it subject to revocation. It
// checks the allow-list again after t is visible to revoke, so a change that
// raced with the set-up cannot leave the tunnel open: either revoke sees t,
// or this check sees the new lists. It refuses when the host is no longer
// allowed or the proxy is shutting down.
func (ts *tunnels) attach(t *tunnel, client, upstream net.Conn, src AllowListSource) *denial {
	t.client, t.upstream = client, upstream
	t.lastActive.Store(time.Now().UnixNano())
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.shut {
		return deny(http.StatusServiceUnavailable, ReasonShuttingDown)
	}
	if !src.AllowLists().Allows(t.plugin, t.target) {
		return deny(http.StatusForbidden, ReasonRevoked)
	}
	ts.open[t] = struct{}{}
	return nil
}

// revoke closes every open tunnel whose host is not in lists (D-32). It is
// the proxy's AllowListSource subscriber.
func (ts *tunnels) revoke(lists plugins.AllowLists) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for t := range ts.open {
		if !lists.Allows(t.plugin, t.target) {
			t.close(CloseRevoked)
		}
	}
}

// closeAll closes every open tunnel with reason and refuses to attach more.
func (ts *tunnels) closeAll(reason string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.shut = true
	for t := range ts.open {
		t.close(reason)
	}
}

// count returns the tunnels open or being set up.
func (ts *tunnels) count() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.total
}

// wait returns once every reserved tunnel has been released.
func (ts *tunnels) wait() { ts.done.Wait() }

// tunnel is one plugin's open connection pair.
type tunnel struct {
	plugin, target   string
	client, upstream net.Conn

	lastActive atomic.Int64 // UnixNano of the last byte moved
	closeOnce  sync.Once
	reason     atomic.Pointer[string]
}

// close ends the tunnel; the first reason given is the one logged.
func (t *tunnel) close(reason string) {
	t.closeOnce.Do(func() {
		t.reason.Store(&reason)
		// Closing is how a tunnel ends, and the reason is what gets logged.
		// This is the only Close of either connection once attached
		// (closeOnce), so an error cannot be a double close; both peers see
		// the end either way, and nobody is left to tell of a failure.
		_ = t.client.Close()
		_ = t.upstream.Close()
	})
}

// pipe carries bytes both ways until both directions end, an error occurs,
// the tunnel is closed, or nothing moves for idle; splice asks for
// splice(2) where both connections allow it (copy). It returns the bytes sent
// upstream (buffered included) and downstream, and the close reason.
func (t *tunnel) pipe(buffered []byte, idle time.Duration, splice bool, m *Metrics) (up, down int64, reason string) {
	watchdog := t.watch(idle)
	defer watchdog.Stop()

	var upN, downN atomic.Int64
	upBytes, downBytes := m.bytes.WithLabelValues("up"), m.bytes.WithLabelValues("down")
	if len(buffered) > 0 {
		n, err := t.upstream.Write(buffered)
		upN.Add(int64(n))
		upBytes.Add(float64(n))
		if err != nil {
			t.close(CloseError)
		}
	}
	errc := make(chan error, 1)
	go func() {
		errc <- t.copy(t.upstream, t.client, splice, &upN, upBytes.Add)
	}()
	errDown := t.copy(t.client, t.upstream, splice, &downN, downBytes.Add)
	errUp := <-errc
	reason = CloseEOF
	if errUp != nil || errDown != nil {
		reason = CloseError
	}
	t.close(reason)
	return upN.Load(), downN.Load(), *t.reason.Load()
}

// watch closes the tunnel once nothing has moved for idle, until the
// returned timer is stopped. It is a timer, not a goroutine, so an idle
// tunnel costs none.
func (t *tunnel) watch(idle time.Duration) *time.Timer {
	var timer *time.Timer
	timer = time.AfterFunc(idle, func() {
		since := time.Since(time.Unix(0, t.lastActive.Load()))
		if since >= idle {
			t.close(CloseIdle)
			return
		}
		timer.Reset(idle - since)
	})
	return timer
}

// copy moves bytes from src to dst until src ends (then it half-closes dst)
// or an error occurs (then it closes the tunnel). Every read records
// activity for the watchdog, and the bytes written are counted. With
// splice, between two bare TCP sockets on Linux, it splices
// (splice_linux.go): no byte enters user space. Otherwise it reads into a
// pooled buffer held only while bytes move (sockReader). Either way an idle
// tunnel holds neither a buffer nor a pipe.
func (t *tunnel) copy(dst, src net.Conn, splice bool, n *atomic.Int64, count func(float64)) error {
	if splice {
		if sp := newSplicer(dst, src); sp != nil {
			err := sp.run(&t.lastActive, n, count)
			if !errors.As(err, new(noPipeError)) {
				return t.ended(dst, err)
			}
			// Out of pipes: the rest goes through user space.
		}
	}
	r := newSockReader(src)
	for {
		buf, k, err := r.read()
		if k > 0 {
			t.lastActive.Store(time.Now().UnixNano())
			w, werr := dst.Write(buf.b[:k])
			putCopyBuffer(buf)
			n.Add(int64(w))
			count(float64(w))
			if werr != nil {
				err = werr
			}
		} else if buf != nil {
			putCopyBuffer(buf)
		}
		if err != nil {
			return t.ended(dst, err)
		}
	}
}

// ended finishes one direction of the tunnel that err stopped: at the
// source's end (io.EOF) it half-closes dst, or closes the tunnel when dst
// cannot be half-closed; on an error it closes the tunnel. It returns the
// error worth reporting, nil when the tunnel ended in one of its ordinary
// ways.
func (t *tunnel) ended(dst net.Conn, err error) error {
	switch {
	case errors.Is(err, io.EOF):
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			if cw.CloseWrite() == nil {
				return nil
			}
		}
		t.close(CloseEOF)
		return nil
	case t.reason.Load() != nil:
		return nil // closed by revoke, shutdown or the watchdog
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		// A side that resets, or has gone when its last bytes are
		// written, closed the tunnel abruptly: a client closing with
		// unread data does so. That is the peer's way to end it.
		t.close(CloseEOF)
		return nil
	default:
		t.close(CloseError)
		return err
	}
}
