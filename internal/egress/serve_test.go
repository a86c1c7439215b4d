package egress

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// serveToken is the one token staticReviewer accepts, as plugin x.
const serveToken = "tok-serve-SECRET"

// staticReviewer accepts serveToken only.
type staticReviewer struct{}

func (staticReviewer) Review(_ context.Context, token string) (string, error) {
	if token == serveToken {
		return plugins.ServiceAccountUsername("x"), nil
	}
	return "", ErrUnauthenticated
}

// loopbackOnly resolves every name to 127.0.0.1.
type loopbackOnly struct{}

func (loopbackOnly) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// serving is a Server running in the background.
type serving struct {
	srv    *Server
	cancel context.CancelFunc
	done   chan error
}

// startServer builds a Server on loopback where plugin x may reach
// api.bank.example on target's port, and serves it until the test ends.
func startServer(t *testing.T, target string, modify func(*Config)) *serving {
	t.Helper()
	_, port, _ := net.SplitHostPort(target)
	store := &AllowListStore{}
	store.Set(plugins.AllowLists{"x": {"api.bank.example:" + port}})
	cfg := Config{
		Proxy: Options{
			Reviewer:            staticReviewer{},
			AllowLists:          store,
			Resolver:            loopbackOnly{},
			Logger:              slog.New(slog.NewTextHandler(io.Discard, nil)),
			UnsafeAllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		},
		Addr:    "127.0.0.1:0",
		OpsAddr: "127.0.0.1:0",
	}
	if modify != nil {
		modify(&cfg)
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &serving{srv: srv, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-s.done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

func getStatus(t *testing.T, addr net.Addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr.String() + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// openTunnel sends CONNECT api.bank.example:port with serveToken.
func openTunnel(t *testing.T, proxy net.Addr, target string) net.Conn {
	t.Helper()
	_, port, _ := net.SplitHostPort(target)
	c, err := net.DialTimeout("tcp", proxy.String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("plugin:" + serveToken))
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "CONNECT api.bank.example:"+port+" HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic "+auth+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	_ = c.SetDeadline(time.Time{})
	t.Cleanup(func() { _ = c.Close() }) // the test may have closed it already
	return c
}

// TestServerLimits: both servers carry the production limits, and a request
// head over MaxHeaderBytes is refused before the proxy sees it.
func TestServerLimits(t *testing.T) {
	s := startServer(t, startEcho(t), nil)
	if len(s.srv.servers) != 2 {
		t.Fatalf("%d servers, want the proxy and the ops server", len(s.srv.servers))
	}
	for i, h := range s.srv.servers {
		if h.ReadHeaderTimeout != 10*time.Second || h.MaxHeaderBytes != 16<<10 || h.IdleTimeout != time.Minute || h.ErrorLog == nil {
			t.Errorf("server %d: ReadHeaderTimeout %v MaxHeaderBytes %d IdleTimeout %v ErrorLog %v",
				i, h.ReadHeaderTimeout, h.MaxHeaderBytes, h.IdleTimeout, h.ErrorLog)
		}
	}
	c, err := net.Dial("tcp", s.srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, c)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	go func() {
		_, _ = io.WriteString(c, "CONNECT api.bank.example:443 HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 128<<10)+"\r\n\r\n")
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("oversized head: %d, want 431", resp.StatusCode)
	}
}

// TestServerOps: /healthz, /readyz following Config.Ready, /metrics from
// Config.Registry.
func TestServerOps(t *testing.T) {
	var ready atomic.Bool
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, startEcho(t), func(c *Config) {
		c.Proxy.Metrics = m
		c.Registry = reg
		c.Ready = func() (bool, string) { return ready.Load(), "waiting for the test" }
	})
	ops := s.srv.OpsAddr()
	if code, _ := getStatus(t, ops, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz %d", code)
	}
	if code, body := getStatus(t, ops, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "waiting for the test") {
		t.Errorf("/readyz before ready: %d %q", code, body)
	}
	ready.Store(true)
	if code, _ := getStatus(t, ops, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz when ready: %d", code)
	}
	if _, body := getStatus(t, ops, "/metrics"); !strings.Contains(body, "openfief_egress_open_tunnels") {
		t.Error("/metrics lacks the proxy's metrics")
	}
}

// TestServeShutdown: on cancel the proxy stops accepting and /readyz turns
// 503 at once, an open tunnel keeps working through the grace period and is
// closed at its end, and Serve returns nil.
func TestServeShutdown(t *testing.T) {
	target := startEcho(t)
	const grace = 1500 * time.Millisecond
	s := startServer(t, target, func(c *Config) { c.ShutdownGrace = grace })
	tunnel := openTunnel(t, s.srv.Addr(), target)
	ops, proxy := s.srv.OpsAddr(), s.srv.Addr()

	start := time.Now()
	s.cancel()
	deadline := time.Now().Add(grace / 2)
	for {
		code, _ := getStatus(t, ops, "/readyz")
		c, err := net.DialTimeout("tcp", proxy.String(), time.Second)
		if err == nil {
			mustClose(t, c)
		}
		if code == http.StatusServiceUnavailable && err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shutting down: /readyz %d, dial error %v; want 503 and a refused dial", code, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	echoOnce(t, tunnel, "still open in the grace period")
	var err error
	select {
	case err = <-s.done:
		s.done <- err // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	if err != nil {
		t.Errorf("Serve: %v", err)
	}
	if d := time.Since(start); d < grace {
		t.Errorf("Serve returned after %v, before the grace period ended", d)
	}
	waitClosed(t, tunnel, 5*time.Second)
}

// TestNewServerFailsClosed: a proxy without its required parts, or an
// address that can't be listened on, is an error and nothing serves.
func TestNewServerFailsClosed(t *testing.T) {
	if _, err := NewServer(Config{Addr: "127.0.0.1:0"}); err == nil {
		t.Error("no Reviewer and AllowLists: no error")
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, taken)
	cfg := Config{Proxy: Options{Reviewer: staticReviewer{}, AllowLists: &AllowListStore{}}, Addr: "127.0.0.1:0", OpsAddr: taken.Addr().String()}
	_, err = NewServer(cfg)
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Errorf("ops address in use: %v, want a listen error", err)
	}
}
