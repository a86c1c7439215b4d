package checkprobe

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"

	"github.com/arkadiuss/openfief/internal/check/probewire"
	"github.com/arkadiuss/openfief/internal/egress"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// runCells runs cells with a short timeout and returns Observed by name
// and the printed JSON.
func runCells(t *testing.T, env Env, cells ...probewire.Cell) (map[string]probewire.Result, string) {
	t.Helper()
	raw, err := json.Marshal(probewire.Request{TimeoutMillis: 500, Cells: cells})
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	getenv := func(k string) string {
		switch k {
		case plugins.EnvHTTPSProxy:
			return env.HTTPSProxy
		case plugins.EnvEgressTokenFile:
			return env.EgressTokenFile
		}
		return ""
	}
	if code := Main(t.Context(), []string{"run", string(raw)}, &out, &errOut, getenv); code != probewire.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	dec := json.NewDecoder(strings.NewReader(out.String()))
	dec.DisallowUnknownFields()
	var resp probewire.Response
	if err := dec.Decode(&resp); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	got := map[string]probewire.Result{}
	for i, r := range resp.Results {
		if r.Name != cells[i].Name {
			t.Errorf("result %d is %q, want %q (request order)", i, r.Name, cells[i].Name)
		}
		got[r.Name] = r
	}
	return got, out.String()
}

// observed checks each cell's Observed.
func observed(t *testing.T, got map[string]probewire.Result, want map[string]string) {
	t.Helper()
	o := map[string]string{}
	for n, r := range got {
		o[n] = r.Observed
	}
	if diff := cmp.Diff(want, o); diff != "" {
		t.Errorf("observed (-want +got):\n%s\nresults: %+v", diff, got)
	}
}

// closedPort is a loopback TCP address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// silentListener accepts TCP connections and never writes, until the test
// ends.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// fullBacklog is a loopback listener whose accept queue is full, so the
// kernel drops further SYNs and a connect times out. It is a listen(2)
// with a backlog of 0 that never accepts, filled by connections the test
// holds open.
func fullBacklog(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	for range 8 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return addr // the queue is full: this SYN was dropped
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	t.Skip("could not fill a listener's accept queue")
	return ""
}

// TestTCP connects to a listener, a closed port and a listener whose queue
// is full.
func TestTCP(t *testing.T) {
	open := silentListener(t)
	got, _ := runCells(t, Env{},
		probewire.Cell{Name: "open", Kind: probewire.KindTCP, Target: open},
		probewire.Cell{Name: "refused", Kind: probewire.KindTCP, Target: closedPort(t)},
		probewire.Cell{Name: "timeout", Kind: probewire.KindTCP, Target: fullBacklog(t)},
	)
	observed(t, got, map[string]string{"open": "open", "refused": "refused", "timeout": "timeout"})
	if d := got["open"].Detail; d != "connected to "+open {
		t.Errorf("detail %q", d)
	}
}

// TestDNS asks a DNS server on loopback over UDP and TCP, a closed port
// over both, and servers that never answer.
func TestDNS(t *testing.T) {
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, m *dns.Msg) {
		r := new(dns.Msg)
		r.SetReply(m)
		if !m.RecursionDesired || len(m.Question) != 1 || m.Question[0].Qtype != dns.TypeA {
			r.Rcode = dns.RcodeFormatError
		} else if m.Question[0].Name == probewire.DefaultDNSQuery {
			rr, _ := dns.NewRR(probewire.DefaultDNSQuery + " 5 IN A 10.96.0.1")
			r.Answer = append(r.Answer, rr)
		} else {
			r.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(r)
	})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	udp := &dns.Server{PacketConn: pc, Handler: handler}
	tcp := &dns.Server{Listener: ln, Handler: handler}
	go func() { _ = udp.ActivateAndServe() }()
	go func() { _ = tcp.ActivateAndServe() }()
	t.Cleanup(func() { _ = udp.Shutdown(); _ = tcp.Shutdown() })

	silentUDP, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silentUDP.Close() })
	closedUDP, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedUDPAddr := closedUDP.LocalAddr().String()
	_ = closedUDP.Close()

	got, _ := runCells(t, Env{},
		probewire.Cell{Name: "udp", Kind: probewire.KindDNSUDP, Target: pc.LocalAddr().String()},
		probewire.Cell{Name: "tcp", Kind: probewire.KindDNSTCP, Target: ln.Addr().String(), Query: "nowhere.example"},
		probewire.Cell{Name: "udp-refused", Kind: probewire.KindDNSUDP, Target: closedUDPAddr},
		probewire.Cell{Name: "tcp-refused", Kind: probewire.KindDNSTCP, Target: closedPort(t)},
		probewire.Cell{Name: "udp-timeout", Kind: probewire.KindDNSUDP, Target: silentUDP.LocalAddr().String()},
		probewire.Cell{Name: "tcp-timeout", Kind: probewire.KindDNSTCP, Target: silentListener(t)},
	)
	observed(t, got, map[string]string{
		"udp": "answered", "tcp": "answered",
		"udp-refused": "refused", "tcp-refused": "refused",
		"udp-timeout": "timeout", "tcp-timeout": "timeout",
	})
	if d := got["udp"].Detail; d != "rcode NOERROR, 1 answers" {
		t.Errorf("udp detail %q", d)
	}
	if d := got["tcp"].Detail; d != "rcode NXDOMAIN, 0 answers" {
		t.Errorf("tcp detail %q", d)
	}
}

// Tokens of the proxy test's reviewer.
const (
	probeToken = "tok-check-probe-a-0123456789-SECRET"
	otherToken = "tok-unknown-0123456789-SECRET"
)

// reviewer stands in for the TokenReview API: probeToken is plugin
// check-probe-a's.
type reviewer struct{}

func (reviewer) Review(_ context.Context, token string) (string, error) {
	if token == probeToken {
		return plugins.ServiceAccountUsername("check-probe-a"), nil
	}
	return "", fmt.Errorf("token review: %w", egress.ErrUnauthenticated)
}

// resolver resolves every name to 127.0.0.1.
type resolver struct{}

func (resolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// TestProxy sends CONNECTs through the real egress proxy (internal/egress)
// on loopback, which allows check-probe-a to reach allowed.example on an
// upstream server that records whatever a tunnel carries: the token opens
// a tunnel and no byte goes into it, no token or another token is 407, a
// host off the allow-list 403. The token is in no output.
func TestProxy(t *testing.T) {
	upstream, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = upstream.Close() })
	received := make(chan int, 8)
	go func() {
		for {
			c, err := upstream.Accept()
			if err != nil {
				return
			}
			go func() {
				n, _ := io.Copy(io.Discard, c)
				received <- int(n)
				_ = c.Close()
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(upstream.Addr().String())
	store := &egress.AllowListStore{}
	store.Set(plugins.AllowLists{"check-probe-a": {"allowed.example:" + port}})
	log := &lockedWriter{}
	p, err := egress.New(egress.Options{
		Reviewer: reviewer{}, AllowLists: store, Resolver: resolver{},
		Logger:              slog.New(slog.NewJSONHandler(log, nil)),
		DialTimeout:         2 * time.Second,
		UnsafeAllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(func() {
		srv.Close()
		_ = p.Shutdown(context.Background())
	})
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(probeToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	otherFile := filepath.Join(dir, "other")
	if err := os.WriteFile(otherFile, []byte(otherToken), 0o600); err != nil {
		t.Fatal(err)
	}
	env := Env{HTTPSProxy: srv.URL, EgressTokenFile: tokenFile}
	allowed := "allowed.example:" + port
	got, out := runCells(t, env,
		probewire.Cell{Name: "token", Kind: probewire.KindProxyToken, Host: allowed},
		probewire.Cell{Name: "no-token", Kind: probewire.KindProxyNoToken, Host: allowed},
		probewire.Cell{Name: "not-allowed", Kind: probewire.KindProxyToken, Host: "other.example:" + port},
	)
	observed(t, got, map[string]string{"token": "status 200", "no-token": "status 407", "not-allowed": "status 403"})
	if d := got["no-token"].Detail; d != "proxy answered 407 Proxy Authentication Required" {
		t.Errorf("detail %q", d)
	}
	select {
	case n := <-received:
		if n != 0 {
			t.Errorf("the tunnel carried %d bytes, want none", n)
		}
	case <-time.After(5 * time.Second):
		t.Error("the tunnel did not close")
	}

	other, out2 := runCells(t, Env{HTTPSProxy: srv.URL, EgressTokenFile: otherFile},
		probewire.Cell{Name: "other-token", Kind: probewire.KindProxyToken, Host: allowed})
	observed(t, other, map[string]string{"other-token": "status 407"})

	noProxy, _ := runCells(t, Env{EgressTokenFile: tokenFile},
		probewire.Cell{Name: "token", Kind: probewire.KindProxyToken, Host: allowed},
		probewire.Cell{Name: "no-token", Kind: probewire.KindProxyNoToken, Host: allowed})
	observed(t, noProxy, map[string]string{"token": "error", "no-token": "error"})
	if d := noProxy["token"].Detail; d != "no HTTPS_PROXY: the plugin was granted no egress" {
		t.Errorf("detail %q", d)
	}
	noFile, _ := runCells(t, Env{HTTPSProxy: srv.URL, EgressTokenFile: filepath.Join(dir, "missing")},
		probewire.Cell{Name: "token", Kind: probewire.KindProxyToken, Host: allowed})
	observed(t, noFile, map[string]string{"token": "error"})

	down, _ := runCells(t, Env{HTTPSProxy: "http://" + closedPort(t), EgressTokenFile: tokenFile},
		probewire.Cell{Name: "refused", Kind: probewire.KindProxyToken, Host: allowed})
	silent, _ := runCells(t, Env{HTTPSProxy: "http://" + silentListener(t), EgressTokenFile: tokenFile},
		probewire.Cell{Name: "timeout", Kind: probewire.KindProxyNoToken, Host: allowed})
	observed(t, down, map[string]string{"refused": "refused"})
	observed(t, silent, map[string]string{"timeout": "timeout"})

	for _, s := range []string{out, out2, log.String()} {
		for _, tok := range []string{probeToken, otherToken, "SECRET"} {
			if strings.Contains(s, tok) {
				t.Errorf("the token %s is in %s", tok, s)
			}
		}
	}
}

// TestProxyHeaders checks the CONNECT the probe sends, byte for byte, with
// a loopback server in place of the proxy: the request line, Host, and
// Proxy-Authorization as internal/egress/auth.go reads it, or none.
func TestProxyHeaders(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	requests := make(chan string, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				r := bufio.NewReader(c)
				var req strings.Builder
				for {
					line, err := r.ReadString('\n')
					req.WriteString(line)
					if err != nil || line == "\r\n" {
						break
					}
				}
				requests <- req.String()
				_, _ = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\nnever read")
			}()
		}
	}()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(" "+probeToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := Env{HTTPSProxy: "http://" + ln.Addr().String() + "/", EgressTokenFile: tokenFile}
	for _, c := range []probewire.Cell{
		{Name: "a", Kind: probewire.KindProxyToken, Host: "example.com:443"},
		{Name: "b", Kind: probewire.KindProxyNoToken, Host: "example.com:443"},
	} {
		got, _ := runCells(t, env, c)
		observed(t, got, map[string]string{c.Name: "status 200"})
		want := "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n"
		if c.Kind == probewire.KindProxyToken {
			want += "Proxy-Authorization: Basic cGx1Z2luOnRvay1jaGVjay1wcm9iZS1hLTAxMjM0NTY3ODktU0VDUkVU\r\n"
		}
		if req := <-requests; req != want+"\r\n" {
			t.Errorf("%s sent %q, want %q", c.Kind, req, want+"\r\n")
		}
	}
}

// lockedWriter is a log sink safe for the proxy's goroutines.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
