//go:build cluster

package fault

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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/egress"
	"github.com/arkadiuss/openfief/internal/egress/proxyserver"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// proxyGrace is the shutdown grace of the proxy under test: open tunnels
// may continue this long once it starts shutting down.
const proxyGrace = 4 * time.Second

// TestProxyRestartedWithTunnelsOpen restarts the egress proxy (wired by
// proxyserver, as cmd/egress-proxy runs it, in this process: the binary has
// no flag to let it dial loopback) with tunnels open, the real operator
// writing the allow-lists and the real TokenReview authenticating plugins:
//
//   - during the shutdown grace a plugin is revoked: its tunnel closes at
//     once, cleanly (EOF), long before the grace ends;
//   - the other tunnels close cleanly (EOF, not a reset and not a hang) when
//     the grace ends;
//   - while the proxy is down one plugin is revoked and another loses one of
//     its two hosts: after the restart the revoked plugin and the revoked
//     host are refused, the host still granted is served;
//   - with the new proxy up, revoking the last plugin closes its open
//     tunnel at once and refuses the next.
//
// At the end every plugin has converged to "nothing runs".
func TestProxyRestartedWithTunnelsOpen(t *testing.T) {
	p := newPlatform(t)
	r := newReplica(p, "operator", true, fastElection, nil)
	r.start()
	echo := startEcho(t)
	d := &driver{p: p, waitFor: time.Minute}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	// a runs v2 with both hosts, b and c run v1 with the first.
	for name, img := range map[string]image{"px-a": suite.v2, "px-b": suite.v1, "px-c": suite.v1} {
		if err := d.createPlugin(ctx, name, img); err != nil {
			t.Fatal(err)
		}
		if err := d.setGrant(ctx, name, img.manifest.Egress); err != nil {
			t.Fatal(err)
		}
	}
	expect := map[string]expectation{"px-a": upgradeApproved.expect(), "px-b": regranted.expect(), "px-c": regranted.expect()}
	p.waitConverged(time.Minute, expect)
	token := map[string]string{}
	for name := range expect {
		token[name] = p.egressToken(ctx, name)
	}
	api, static := hostAPI+":443", hostStatic+":443"

	px := p.startProxy(ctx, "127.0.0.1:0", echo)
	addr := px.addr
	tunnels := map[string]net.Conn{
		"a→api":    px.open(t, token["px-a"], api),
		"a→static": px.open(t, token["px-a"], static),
		"b→api":    px.open(t, token["px-b"], api),
		"c→api":    px.open(t, token["px-c"], api),
	}
	for name, c := range tunnels {
		echoOnce(t, name, c)
	}
	p.logf("proxy 1 at %s: 4 tunnels open and echoing", addr)

	// Shut down with tunnels open; revoke c during the grace.
	shutdown := time.Now()
	px.stop()
	p.logf("proxy 1 shutting down with %s grace; revoking px-c", proxyGrace)
	if err := d.deleteGrant(ctx, "px-c"); err != nil {
		t.Fatal(err)
	}
	closedAt := waitClean(t, "c→api (revoked during the grace)", tunnels["c→api"], proxyGrace+5*time.Second)
	if closedAt.Sub(shutdown) >= proxyGrace {
		t.Errorf("the revoked tunnel closed only with the grace, %s after shutdown began", closedAt.Sub(shutdown))
	}
	p.logf("c→api closed cleanly %s after shutdown began: the revocation reached the stopping proxy",
		closedAt.Sub(shutdown).Round(time.Millisecond))
	for _, name := range []string{"a→api", "a→static", "b→api"} {
		at := waitClean(t, name, tunnels[name], proxyGrace+5*time.Second)
		if at.Sub(shutdown) < proxyGrace-500*time.Millisecond {
			t.Errorf("%s closed %s after shutdown began, before the grace ended", name, at.Sub(shutdown))
		}
	}
	if err := px.wait(); err != nil {
		t.Fatalf("proxy 1: %v", err)
	}
	p.wantCloses(map[string]string{
		"px-c " + api: egress.CloseRevoked, "px-a " + api: egress.CloseShutdown,
		"px-a " + static: egress.CloseShutdown, "px-b " + api: egress.CloseShutdown,
	})
	p.logf("the other 3 tunnels closed cleanly (EOF) when the %s grace ended; proxy 1 is gone; its access log agrees (revoked, shutdown)", proxyGrace)

	// Down: revoke b, narrow a to its first host.
	if err := d.deleteGrant(ctx, "px-b"); err != nil {
		t.Fatal(err)
	}
	if err := d.setGrant(ctx, "px-a", []string{hostAPI}); err != nil {
		t.Fatal(err)
	}
	// The same image as the spec, narrowed: Ready says Running (see narrowed).
	expect["px-a"] = expectation{status: metav1.ConditionTrue, reason: v1alpha1.ReasonRunning, image: suite.v2.ref, allow: allowList(hostAPI), pending: canonical(hostStatic)}
	expect["px-b"], expect["px-c"] = revoked.expect(), revoked.expect()
	p.waitConverged(time.Minute, expect)
	p.logf("while the proxy was down: px-b revoked, px-a narrowed to %s (the operator updated the allow-list)", hostAPI)

	// Restart on the same address.
	px = p.startProxy(ctx, addr, echo)
	p.logf("proxy 2 up at %s", px.addr)
	for _, c := range []struct {
		name, plugin, target string
		want                 []int
	}{
		{"a→api", "px-a", api, []int{http.StatusOK}},
		{"a→static (host revoked while down)", "px-a", static, []int{http.StatusForbidden}},
		// A revoked plugin loses its ServiceAccount too, so its token may
		// fail authentication before the allow-list is consulted.
		{"b→api (revoked while down)", "px-b", api, []int{http.StatusForbidden, http.StatusProxyAuthRequired}},
		{"c→api (revoked during the grace)", "px-c", api, []int{http.StatusForbidden, http.StatusProxyAuthRequired}},
	} {
		code, conn := px.connect(t, token[c.plugin], c.target)
		if !containsInt(c.want, code) {
			t.Errorf("after the restart, %s: %d, want one of %v", c.name, code, c.want)
		}
		if conn != nil {
			echoOnce(t, c.name, conn)
			tunnels[c.name] = conn
		}
	}
	p.logf("after the restart: a→api served; a→static, b and c refused")

	// Revoke a with its tunnel open.
	revokedAt := time.Now()
	if err := d.deleteGrant(ctx, "px-a"); err != nil {
		t.Fatal(err)
	}
	at := waitClean(t, "a→api (revoked with the proxy up)", tunnels["a→api"], 10*time.Second)
	p.logf("px-a revoked: its open tunnel closed cleanly %s later", at.Sub(revokedAt).Round(time.Millisecond))
	if code, conn := px.connect(t, token["px-a"], api); code == http.StatusOK {
		_ = conn.Close()
		t.Errorf("a CONNECT after px-a's revocation was served")
	}
	expect["px-a"] = expectation{status: metav1.ConditionFalse, reason: v1alpha1.ReasonNoGrant, pending: canonical(hostAPI, hostStatic)}
	p.waitConverged(time.Minute, expect)
	px.stop()
	if err := px.wait(); err != nil {
		t.Fatalf("proxy 2: %v", err)
	}
	p.wantCloses(map[string]string{"px-a " + api: egress.CloseRevoked})
}

// wantCloses checks the proxy's access log: the last closed tunnel of each
// "plugin target" key ended for the given reason.
func (p *platform) wantCloses(want map[string]string) {
	p.t.Helper()
	raw, err := os.ReadFile(filepath.Join(p.dir, "egress-proxy.log"))
	if err != nil {
		p.t.Fatal(err)
	}
	last := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.Contains(line, " decision=allow ") {
			continue
		}
		f := map[string]string{}
		for _, kv := range strings.Fields(line) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		last[f["plugin"]+" "+f["target"]] = f["reason"]
	}
	for k, reason := range want {
		if last[k] != reason {
			p.t.Errorf("the proxy's access log: the last tunnel %s closed for %q, want %q", k, last[k], reason)
		}
	}
}

// egressToken is a fresh openfief-egress token of the plugin's
// ServiceAccount, as the plugin's projected volume would hold.
func (p *platform) egressToken(ctx context.Context, plugin string) string {
	p.t.Helper()
	tr, err := p.cs.CoreV1().ServiceAccounts(plugins.Namespace).CreateToken(ctx, plugins.ServiceAccountName(plugin), &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{plugins.AudienceEgress}, ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		p.t.Fatal(err)
	}
	return tr.Status.Token
}

// proxyRun is one running egress proxy.
type proxyRun struct {
	addr   string
	cancel context.CancelFunc
	done   chan struct{} // closed when Serve returned
	err    error         // what Serve returned
}

// startProxy runs an egress proxy on addr as cmd/egress-proxy runs it
// (proxyserver.Start, with the binary's defaults; the allow-list watch
// outlives the serving context, so revocations still close tunnels during
// the shutdown grace), resolving the test hosts to loopback and connecting
// their port 443 to echo. It returns once the proxy has the allow-lists.
func (p *platform) startProxy(ctx context.Context, addr string, echo string) *proxyRun {
	p.t.Helper()
	logf, err := os.OpenFile(filepath.Join(p.dir, "egress-proxy.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.t.Fatal(err)
	}
	o := proxyserver.DefaultOptions()
	o.Client = p.cs
	o.Listen, o.MetricsListen = addr, ""
	o.DialTimeout, o.ShutdownGrace = 5*time.Second, proxyGrace
	o.Log = slog.New(slog.NewTextHandler(logf, nil))
	o.Resolver, o.Dialer = loopbackResolver{}, &redirectDialer{to: echo}
	o.UnsafeAllowPrefixes = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	serveCtx, cancel := context.WithCancel(ctx)
	var srv *proxyserver.Server
	// The previous proxy's port may take a moment to be free again.
	for deadline := time.Now().Add(10 * time.Second); ; {
		srv, err = proxyserver.Start(serveCtx, o)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		cancel()
		_ = logf.Close()
		p.t.Fatal(err)
	}
	run := &proxyRun{addr: srv.Addr(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(run.done)
		run.err = srv.Wait()
		_ = logf.Close()
	}()
	p.t.Cleanup(func() {
		cancel()
		<-run.done
	})
	for deadline := time.Now().Add(30 * time.Second); ; {
		if ok, _ := srv.Ready(); ok {
			break
		}
		if time.Now().After(deadline) {
			p.t.Fatal("the proxy never read the allow-lists")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return run
}

// stop starts the proxy's shutdown; wait waits for its end.
func (r *proxyRun) stop() { r.cancel() }

func (r *proxyRun) wait() error {
	<-r.done
	return r.err
}

// connect sends a CONNECT for target with the plugin's token and returns
// the status and, when 200, the open tunnel.
func (r *proxyRun) connect(t *testing.T, token, target string) (int, net.Conn) {
	t.Helper()
	c, err := net.DialTimeout("tcp", r.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("plugin:" + token))
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	_, _ = io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nProxy-Authorization: Basic "+auth+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		_ = c.Close()
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if resp.StatusCode != http.StatusOK {
		_ = c.Close() // a refusal closes the connection anyway
		return resp.StatusCode, nil
	}
	_ = c.SetDeadline(time.Time{})
	t.Cleanup(func() { _ = c.Close() }) // most are closed by the proxy already
	return resp.StatusCode, c
}

// open is connect that must succeed.
func (r *proxyRun) open(t *testing.T, token, target string) net.Conn {
	t.Helper()
	code, c := r.connect(t, token, target)
	if code != http.StatusOK {
		t.Fatalf("CONNECT %s: %d, want 200", target, code)
	}
	return c
}

// echoOnce sends a line through a tunnel and reads it back.
func echoOnce(t *testing.T, name string, c net.Conn) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping\n" {
		t.Fatalf("%s: echo %q, %v", name, buf, err)
	}
}

// waitClean waits until the tunnel's next read ends in a clean close (EOF,
// not a reset) and returns when; a tunnel still open after within fails
// the test, as does any data or other error.
func waitClean(t *testing.T, name string, c net.Conn, within time.Duration) time.Time {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(within))
	n, err := c.Read(make([]byte, 1))
	at := time.Now()
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF) && n == 0:
		return at
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("%s: still open after %s (a hang, not a close)", name, within)
	default:
		t.Fatalf("%s: read %d bytes, %v; want a clean EOF", name, n, err)
	}
	return at
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// startEcho serves an echo on loopback: the stand-in for both test hosts.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// loopbackResolver resolves the test hosts to 127.0.0.1; other names do
// not exist.
type loopbackResolver struct{}

func (loopbackResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	switch strings.TrimSuffix(strings.ToLower(host), ".") {
	case hostAPI, hostStatic:
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// redirectDialer connects 127.0.0.1:443, the address the proxy checked, to
// the echo server.
type redirectDialer struct{ to string }

func (d *redirectDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if address == "127.0.0.1:443" {
		address = d.to
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}
