package egress

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
)

// Defaults of the limits on connections that have not become tunnels yet.
const (
	// DefaultMaxPendingConns caps the connections the proxy holds before
	// they become tunnels (reading a request head, authenticating,
	// resolving, dialling) across all clients.
	DefaultMaxPendingConns = 256
	// DefaultMaxPendingPerClient caps them per client address: a plugin
	// pod has one, so one hostile pod cannot take the whole budget.
	DefaultMaxPendingPerClient = 16
)

// pendingLimiter caps the connections the proxy holds before they become
// tunnels: anyone who can reach the proxy's port could
// otherwise open thousands of connections trickling a request head and hold
// the proxy's memory. It watches http.Server.ConnState: a new connection
// over either cap is closed at once, before a byte of it is read; a hijacked
// one (a tunnel, capped by Options.MaxTunnels) or a closed one frees its
// place.
type pendingLimiter struct {
	max, perClient int

	mu       sync.Mutex
	total    int
	byClient map[netip.Addr]int
	counted  map[net.Conn]netip.Addr
}

func newPendingLimiter(maxTotal, perClient int) *pendingLimiter {
	if maxTotal <= 0 {
		maxTotal = DefaultMaxPendingConns
	}
	if perClient <= 0 {
		perClient = DefaultMaxPendingPerClient
	}
	return &pendingLimiter{max: maxTotal, perClient: perClient, byClient: map[netip.Addr]int{}, counted: map[net.Conn]netip.Addr{}}
}

// connState is the http.Server.ConnState hook.
func (l *pendingLimiter) connState(c net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		if !l.admit(c) {
			_ = c.Close()
		}
	case http.StateHijacked, http.StateClosed:
		l.release(c)
	}
}

// admit counts c, or reports false when a cap is reached.
func (l *pendingLimiter) admit(c net.Conn) bool {
	client := clientAddr(c)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total >= l.max || l.byClient[client] >= l.perClient {
		return false
	}
	l.total++
	l.byClient[client]++
	l.counted[c] = client
	return true
}

// release frees c's place, if it held one.
func (l *pendingLimiter) release(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	client, ok := l.counted[c]
	if !ok {
		return
	}
	delete(l.counted, c)
	l.total--
	if l.byClient[client]--; l.byClient[client] <= 0 {
		delete(l.byClient, client)
	}
}

// pending reports the connections held before becoming tunnels.
func (l *pendingLimiter) pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// clientAddr is c's remote IP address (the zero Addr when unknown, which
// then shares one per-client budget).
func clientAddr(c net.Conn) netip.Addr {
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}
