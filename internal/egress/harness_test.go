package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// Tokens the fake reviewer knows. Real tokens are JWTs; these only need to be
// distinctive so the log checks can look for them.
const (
	tokenX       = "tok-x-0123456789abcdef-SECRET"
	tokenY       = "tok-y-0123456789abcdef-SECRET"
	tokenCore    = "tok-core-audience-SECRET" // an openfief-core token: refused for openfief-egress
	tokenExpired = "tok-expired-SECRET"
	tokenOtherNS = "tok-other-namespace-SECRET"
	tokenCoreSA  = "tok-core-serviceaccount-SECRET"
	tokenBroken  = "tok-review-broken-SECRET"
)

// fakeReviewer stands in for the TokenReview API.
type fakeReviewer struct {
	mu    sync.Mutex
	calls int
}

func (f *fakeReviewer) Review(_ context.Context, token string) (string, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	switch token {
	case tokenX:
		return plugins.ServiceAccountUsername("x"), nil
	case tokenY:
		return plugins.ServiceAccountUsername("y"), nil
	case tokenOtherNS:
		return "system:serviceaccount:other:plugin-x", nil
	case tokenCoreSA:
		return "system:serviceaccount:openfief:openfief-core", nil
	case tokenBroken:
		// A badly behaved reviewer that puts the token in its error: the
		// proxy must still not log it.
		return "", fmt.Errorf("review of %s: connection refused", token)
	}
	return "", fmt.Errorf("token review: %w", ErrUnauthenticated)
}

// fakeResolver maps names to addresses and counts lookups. A name with a
// sequence of answers gets the next one on each lookup. Like a pod's stub
// resolver with Kubernetes' ndots:5, it tries the search domain
// podSearchDomain first for a name without a trailing dot, so a test can show
// that the proxy asks only absolute names. Names are set and counted without
// their trailing dot.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	lookups map[string]int
}

// podSearchDomain is the first search domain of a pod in openfief.
const podSearchDomain = "openfief.svc.cluster.local"

func newFakeResolver() *fakeResolver {
	return &fakeResolver{answers: map[string][][]netip.Addr{}, lookups: map[string]int{}}
}

func (r *fakeResolver) set(host string, answers ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var addrs []netip.Addr
	for _, a := range answers {
		addrs = append(addrs, netip.MustParseAddr(a))
	}
	r.answers[host] = append(r.answers[host], addrs)
}

func (r *fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if network != "ip" {
		return nil, fmt.Errorf("unexpected network %q", network)
	}
	names := []string{strings.TrimSuffix(host, ".")}
	if !strings.HasSuffix(host, ".") {
		names = []string{host + "." + podSearchDomain, host}
	}
	for _, name := range names {
		n := r.lookups[name]
		r.lookups[name]++
		if seq := r.answers[name]; len(seq) > 0 {
			return seq[min(n, len(seq)-1)], nil
		}
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *fakeResolver) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.lookups {
		n += c
	}
	return n
}

// recordingDialer dials for real, optionally redirecting an address (a
// "public" one standing for the internet) to a loopback server, and records
// every address it is asked for.
type recordingDialer struct {
	mu       sync.Mutex
	dialled  []string
	redirect map[string]string
}

func (d *recordingDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.dialled = append(d.dialled, address)
	to := address
	if r, ok := d.redirect[address]; ok {
		to = r
	}
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, to)
}

func (d *recordingDialer) addresses() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dialled...)
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// env is a proxy on loopback with fakes around it and a plain echo server
// standing in for an institution.
type env struct {
	t        testing.TB
	proxy    *Proxy
	addr     string // the proxy's host:port
	store    *AllowListStore
	reviewer *fakeReviewer
	resolver *fakeResolver
	dialer   *recordingDialer
	log      *syncBuffer
	echoAddr string // 127.0.0.1:port of the echo server
	echoPort string
}

// newEnv starts a proxy where plugin x may reach api.bank.example and
// files.bank.example on the echo server's port, and plugin y may reach
// other.example there; both names resolve to 127.0.0.1, which the proxy is
// allowed to dial for the test. modify may change the options first.
func newEnv(t testing.TB, modify func(*Options)) *env {
	t.Helper()
	e := &env{
		t:        t,
		store:    &AllowListStore{},
		reviewer: &fakeReviewer{},
		resolver: newFakeResolver(),
		dialer:   &recordingDialer{redirect: map[string]string{}},
		log:      &syncBuffer{},
	}
	e.echoAddr = startEcho(t)
	_, e.echoPort, _ = net.SplitHostPort(e.echoAddr)
	e.resolver.set("api.bank.example", "127.0.0.1")
	e.resolver.set("files.bank.example", "127.0.0.1")
	e.resolver.set("other.example", "127.0.0.1")
	e.store.Set(plugins.AllowLists{
		"x": {"api.bank.example:" + e.echoPort, "files.bank.example:" + e.echoPort, "private.bank.example:" + e.echoPort},
		"y": {"other.example:" + e.echoPort},
	})
	opts := Options{
		Reviewer:            e.reviewer,
		AllowLists:          e.store,
		Resolver:            e.resolver,
		Dialer:              e.dialer,
		Logger:              slog.New(slog.NewJSONHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		DialTimeout:         2 * time.Second,
		IdleTimeout:         time.Minute,
		UnsafeAllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	}
	if modify != nil {
		modify(&opts)
	}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.proxy = p
	srv := httptest.NewServer(p)
	e.addr = srv.Listener.Addr().String()
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
	})
	return e
}

// startEcho serves an echo on 127.0.0.1 until the test ends.
func startEcho(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	conns := map[net.Conn]bool{}
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				_ = c.Close() // the cleanup may have closed it already
			}()
		}
	}()
	t.Cleanup(func() {
		mustClose(t, ln)
		mu.Lock()
		for c := range conns {
			_ = c.Close() // ends its copy, unless the client ended it (and it is closed) already
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// mustClose closes c, a connection or listener only the test closes, and
// fails the test if that fails: it would mean a double Close somewhere.
func mustClose(tb testing.TB, c io.Closer) {
	tb.Helper()
	if err := c.Close(); err != nil {
		tb.Errorf("close: %v", err)
	}
}

// basic is a Proxy-Authorization value as Go's HTTP client sends it.
func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// connect sends a raw request line with an optional Proxy-Authorization and
// returns the response and, on 200, the tunnel's connection.
func (e *env) connect(method, target, auth string) (*http.Response, net.Conn) {
	e.t.Helper()
	c, err := net.DialTimeout("tcp", e.addr, 2*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var req strings.Builder
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: egress-proxy\r\n", method, target)
	if auth != "" {
		fmt.Fprintf(&req, "Proxy-Authorization: %s\r\n", auth)
	}
	req.WriteString("\r\n")
	if _, err := io.WriteString(c, req.String()); err != nil {
		e.t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		e.t.Fatalf("%s %s: reading the response: %v", method, target, err)
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		mustClose(e.t, c)
		return resp, nil
	}
	_ = c.SetDeadline(time.Time{})
	e.t.Cleanup(func() { _ = c.Close() }) // the test may have closed it already
	return resp, &bufferedConn{Conn: c, r: br}
}

// tunnel opens a tunnel for token to target or fails the test.
func (e *env) tunnel(token, target string) net.Conn {
	e.t.Helper()
	resp, c := e.connect(http.MethodConnect, target, basic(ProxyUser, token))
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("CONNECT %s: status %d, want 200; log:\n%s", target, resp.StatusCode, e.log.String())
	}
	return c
}

// bufferedConn reads through the reader that parsed the response.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// echoOnce writes msg and reads it back through c.
func echoOnce(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	defer func() { _ = c.SetDeadline(time.Time{}) }() // fails only if c is closed: then no deadline matters
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatalf("write through tunnel: %v", err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read through tunnel: %v", err)
	}
	if string(got) != msg {
		t.Fatalf("echo = %q, want %q", got, msg)
	}
}

// waitClosed fails unless c is closed by the far end within d.
func waitClosed(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 64)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("tunnel still open after %v", d)
		}
		return
	}
}

// waitOpenTunnels waits up to 5 s until the proxy holds want open tunnels.
func (e *env) waitOpenTunnels(t *testing.T, want int, what string) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, what, func() (bool, string) {
		n := e.proxy.OpenTunnels()
		return n == want, fmt.Sprintf("%d open tunnels", n)
	})
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
