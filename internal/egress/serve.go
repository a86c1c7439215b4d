package egress

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Limits of the proxy's HTTP servers. Plugins are not trusted, so a client
// gets a bounded time and size for its request head, and an idle connection
// is closed (OF-10).
const (
	// ReadHeaderTimeout bounds reading a request's head.
	ReadHeaderTimeout = 10 * time.Second
	// MaxHeaderBytes bounds a request's head. A CONNECT head holds a target
	// and a Proxy-Authorization header with one ServiceAccount token (a
	// few KiB); 16 KiB leaves room and keeps a connection that trickles a
	// head cheap.
	MaxHeaderBytes = 16 << 10
	// ServerIdleTimeout closes a kept-alive connection that sends no next
	// request (a tunnel's idleness is Options.IdleTimeout).
	ServerIdleTimeout = time.Minute
)

// DefaultShutdownGrace is the default of --shutdown-grace: how long open
// tunnels may continue once the proxy starts shutting down.
const DefaultShutdownGrace = 20 * time.Second

// Config configures a Server: the proxy, where it serves CONNECT, and its
// optional operations endpoints.
type Config struct {
	// Proxy configures the CONNECT handler; Reviewer and AllowLists are
	// required, and Proxy.Logger also receives the servers' errors.
	Proxy Options
	// Addr is the TCP address the proxy serves CONNECT on (--listen);
	// "127.0.0.1:0" picks a free port, which Server.Addr then tells.
	Addr string
	// OpsAddr is where /healthz, /readyz and /metrics are served
	// (--metrics-listen); empty means no ops server.
	OpsAddr string
	// Ready reports whether the allow-lists are loaded, and why not
	// (kube.AllowLists.Ready); /readyz answers 503 with the reason until it
	// does, and while shutting down. Nil counts as ready.
	Ready func() (bool, string)
	// Registry holds the metrics /metrics serves (the proxy's, registered
	// with NewMetrics, and any others); nil serves no /metrics.
	Registry *prometheus.Registry
	// ShutdownGrace is how long open tunnels may continue once serving ends
	// (--shutdown-grace, DefaultShutdownGrace); zero closes them at once.
	ShutdownGrace time.Duration
	// MaxPendingConns caps the connections held before they become tunnels,
	// over all clients (--max-pending-conns, DefaultMaxPendingConns when
	// zero); a connection beyond it is closed unread.
	MaxPendingConns int
	// MaxPendingPerClient caps them per client IP address
	// (--max-pending-per-client, DefaultMaxPendingPerClient when zero).
	MaxPendingPerClient int
}

// Server is the egress proxy with its HTTP servers (D-32): NewServer builds
// it and listens, Serve serves until its context is done and then shuts
// down. internal/egress/proxyserver (the binary and the local platform) and
// the tests all run the proxy through it, so they share its limits and its
// shutdown.
type Server struct {
	log      *slog.Logger
	grace    time.Duration
	proxy    *Proxy
	proxyLn  net.Listener
	pending  *pendingLimiter
	opsLn    net.Listener // nil without an ops server
	servers  []*http.Server
	stopping atomic.Bool
}

// NewServer builds the Proxy from cfg.Proxy and listens on cfg.Addr (and
// cfg.OpsAddr when set). Call Serve exactly once, which releases the
// listeners and the proxy's subscription when it returns.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Proxy.Logger == nil {
		cfg.Proxy.Logger = slog.Default()
	}
	proxy, err := New(cfg.Proxy)
	if err != nil {
		return nil, err
	}
	s := &Server{log: cfg.Proxy.Logger, grace: max(cfg.ShutdownGrace, 0), proxy: proxy}
	if s.proxyLn, err = net.Listen("tcp", cfg.Addr); err != nil {
		_ = proxy.Shutdown(context.Background())
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	errorLog := slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)
	s.pending = newPendingLimiter(cfg.MaxPendingConns, cfg.MaxPendingPerClient)
	proxySrv := newServer(proxy, errorLog)
	proxySrv.ConnState = s.pending.connState
	s.servers = []*http.Server{proxySrv}
	if cfg.OpsAddr != "" {
		if s.opsLn, err = net.Listen("tcp", cfg.OpsAddr); err != nil {
			_ = s.proxyLn.Close()
			_ = proxy.Shutdown(context.Background())
			return nil, fmt.Errorf("listen on %s: %w", cfg.OpsAddr, err)
		}
		s.servers = append(s.servers, newServer(opsHandler(cfg, &s.stopping), errorLog))
	}
	return s, nil
}

// Addr is the address the proxy serves CONNECT on.
func (s *Server) Addr() net.Addr { return s.proxyLn.Addr() }

// OpsAddr is the address of the ops endpoints, nil without them.
func (s *Server) OpsAddr() net.Addr {
	if s.opsLn == nil {
		return nil
	}
	return s.opsLn.Addr()
}

// Serve serves until ctx is done or a server fails, then shuts down in
// order: /readyz turns 503, the proxy stops accepting, open tunnels get the
// shutdown grace to end before they are closed, and the ops server stops.
// It returns nil after a shutdown that ctx asked for, or the error that
// ended serving.
func (s *Server) Serve(ctx context.Context) error {
	listeners := []net.Listener{s.proxyLn}
	attrs := []any{"listen", s.proxyLn.Addr().String()}
	if s.opsLn != nil {
		listeners = append(listeners, s.opsLn)
		attrs = append(attrs, "metrics", s.opsLn.Addr().String())
	}
	errc := make(chan error, len(s.servers))
	for i, srv := range s.servers {
		ln := listeners[i]
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("serving %s: %w", ln.Addr(), err)
			}
		}()
	}
	s.log.Info("egress proxy serving", attrs...)

	var runErr error
	select {
	case <-ctx.Done():
		s.log.Info("shutting down", "grace", s.grace)
	case runErr = <-errc:
	}
	s.stopping.Store(true)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.grace)
	defer cancel()
	_ = s.servers[0].Shutdown(shutdownCtx) // stops accepting; tunnels are hijacked
	if err := s.proxy.Shutdown(shutdownCtx); err != nil {
		s.log.Info("closed the tunnels still open at the end of the grace period")
	}
	for _, srv := range s.servers[1:] {
		_ = srv.Shutdown(shutdownCtx)
	}
	return runErr
}

// newServer returns an HTTP/1.1 server of h with the limits above, logging
// its errors (failed handshakes, oversized heads) to errorLog.
func newServer(h http.Handler, errorLog *stdlog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		IdleTimeout:       ServerIdleTimeout,
		ErrorLog:          errorLog,
	}
}
