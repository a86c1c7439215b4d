package egress

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestTLSThroughProxy is the SDK's path (D-63): Go's HTTP client with the
// token in the proxy URL, a CONNECT, and TLS to the institution end to end.
func TestTLSThroughProxy(t *testing.T) {
	bank := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "balance: 42") // fails only when the client is gone
	}))
	t.Cleanup(bank.Close)
	_, port, _ := net.SplitHostPort(bank.Listener.Addr().String())

	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *Options) { o.Metrics = metrics })
	e.store.Set(plugins.AllowLists{"x": {"api.bank.example:" + port}})

	pool := x509.NewCertPool()
	pool.AddCert(bank.Certificate())
	client := &http.Client{Transport: &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: e.addr, User: url.UserPassword(ProxyUser, tokenX)}),
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "example.com"},
	}, Timeout: 10 * time.Second}
	resp, err := client.Get("https://API.Bank.Example:" + port + "/accounts")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "balance: 42" {
		t.Fatalf("body = %q", body)
	}
	client.CloseIdleConnections()
	e.waitOpenTunnels(t, 0, "the tunnel's access-log line")

	line := findLogLine(t, e.log.String(), "egress")
	if line["plugin"] != "x" || line["target"] != "api.bank.example:"+port || line["decision"] != DecisionAllow ||
		line["reason"] != CloseEOF || line["bytes_up"].(float64) == 0 || line["bytes_down"].(float64) == 0 {
		t.Errorf("access log line = %v", line)
	}
	if got := promtestutil.ToFloat64(metrics.decisions.WithLabelValues(DecisionAllow, ReasonAllowed)); got != 1 {
		t.Errorf("allowed decisions = %v, want 1", got)
	}
	if got := promtestutil.ToFloat64(metrics.bytes.WithLabelValues("down")); got == 0 {
		t.Error("no downstream bytes counted")
	}
	if got := promtestutil.ToFloat64(metrics.open); got != 0 {
		t.Errorf("open tunnels gauge = %v after close", got)
	}
	if e.resolver.total() != 1 {
		t.Errorf("lookups = %d, want 1", e.resolver.total())
	}
}

// findLogLine returns the last JSON log line with msg.
func findLogLine(t *testing.T, log, msg string) map[string]any {
	t.Helper()
	var found map[string]any
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == msg {
			found = m
		}
	}
	if found == nil {
		t.Fatalf("no %q line in log:\n%s", msg, log)
	}
	return found
}

// TestRefusals: every refused request gets its status and reason, and
// nothing is dialled. Only the blocked-address cases resolve the name.
func TestRefusals(t *testing.T) {
	type tc struct {
		method, target, auth string
		lists                *plugins.AllowLists // replaces the env's lists
		status               int
		reason               string
		resolves             bool
	}
	none := plugins.AllowLists(nil)
	cases := map[string]tc{
		"GET proxying":           {method: "GET", target: "http://api.bank.example/", auth: basic(ProxyUser, tokenX), status: 405, reason: ReasonMethodNotAllowed},
		"POST proxying":          {method: "POST", target: "http://api.bank.example/", auth: basic(ProxyUser, tokenX), status: 405, reason: ReasonMethodNotAllowed},
		"GET origin form":        {method: "GET", target: "/", status: 405, reason: ReasonMethodNotAllowed},
		"no credentials":         {target: "api.bank.example:P", status: 407, reason: ReasonNoCredentials},
		"bearer scheme":          {target: "api.bank.example:P", auth: "Bearer " + tokenX, status: 407, reason: ReasonBadCredentials},
		"wrong user":             {target: "api.bank.example:P", auth: basic("admin", tokenX), status: 407, reason: ReasonBadCredentials},
		"empty password":         {target: "api.bank.example:P", auth: basic(ProxyUser, ""), status: 407, reason: ReasonBadCredentials},
		"garbled base64":         {target: "api.bank.example:P", auth: "Basic !!!", status: 407, reason: ReasonBadCredentials},
		"unknown token":          {target: "api.bank.example:P", auth: basic(ProxyUser, "nope"), status: 407, reason: ReasonUnauthenticated},
		"expired token":          {target: "api.bank.example:P", auth: basic(ProxyUser, tokenExpired), status: 407, reason: ReasonUnauthenticated},
		"core-audience token":    {target: "api.bank.example:P", auth: basic(ProxyUser, tokenCore), status: 407, reason: ReasonUnauthenticated},
		"SA outside openfief":    {target: "api.bank.example:P", auth: basic(ProxyUser, tokenOtherNS), status: 403, reason: ReasonNotAPlugin},
		"core's SA":              {target: "api.bank.example:P", auth: basic(ProxyUser, tokenCoreSA), status: 403, reason: ReasonNotAPlugin},
		"review unavailable":     {target: "api.bank.example:P", auth: basic(ProxyUser, tokenBroken), status: 503, reason: ReasonReviewFailed},
		"host not on list":       {target: "evil.example:P", auth: basic(ProxyUser, tokenX), status: 403, reason: ReasonNotAllowed},
		"another plugin's host":  {target: "other.example:P", auth: basic(ProxyUser, tokenX), status: 403, reason: ReasonNotAllowed},
		"port not listed":        {target: "api.bank.example:8443", auth: basic(ProxyUser, tokenX), status: 403, reason: ReasonNotAllowed},
		"subdomain not listed":   {target: "www.api.bank.example:P", auth: basic(ProxyUser, tokenX), status: 403, reason: ReasonNotAllowed},
		"IPv4 literal":           {target: "127.0.0.1:P", auth: basic(ProxyUser, tokenX), status: 403, reason: ReasonIPLiteral},
		"IPv6 literal":           {target: "[::1]:P", auth: basic(ProxyUser, tokenX), status: 403, reason: ReasonIPLiteral},
		"IPv4 shorthand":         {target: "127.1:P", auth: basic(ProxyUser, tokenX), status: 403, reason: ReasonInvalidTarget},
		"wildcard":               {target: "*.bank.example:P", auth: basic(ProxyUser, tokenX), status: 403, reason: ReasonInvalidTarget},
		"single label":           {target: "core:P", auth: basic(ProxyUser, tokenX), status: 403, reason: ReasonInvalidTarget},
		"no port":                {target: "api.bank.example", auth: basic(ProxyUser, tokenX), status: 400, reason: ReasonBadTarget},
		"userinfo in target":     {target: "a@api.bank.example:P", auth: basic(ProxyUser, tokenX), status: 400, reason: ReasonBadTarget},
		"resolves to private":    {target: "private.bank.example:P", auth: basic(ProxyUser, tokenX), status: 403, reason: ReasonBlockedAddress, resolves: true},
		"no lists (CM missing)":  {target: "api.bank.example:P", auth: basic(ProxyUser, tokenX), lists: &none, status: 403, reason: ReasonNotAllowed},
		"plugin's list is empty": {target: "api.bank.example:P", auth: basic(ProxyUser, tokenX), lists: &plugins.AllowLists{"x": {}}, status: 403, reason: ReasonNotAllowed},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.resolver.set("private.bank.example", "10.1.2.3")
			if c.lists != nil {
				e.store.Set(*c.lists)
			}
			method := c.method
			if method == "" {
				method = http.MethodConnect
			}
			resp, _ := e.connect(method, strings.ReplaceAll(c.target, ":P", ":"+e.echoPort), c.auth)
			if resp.StatusCode != c.status {
				t.Errorf("status = %d, want %d", resp.StatusCode, c.status)
			}
			if c.status == 407 && resp.Header.Get("Proxy-Authenticate") != `Basic realm="openfief-egress"` {
				t.Errorf("Proxy-Authenticate = %q", resp.Header.Get("Proxy-Authenticate"))
			}
			if c.status == 405 && resp.Header.Get("Allow") != "CONNECT" {
				t.Errorf("Allow = %q", resp.Header.Get("Allow"))
			}
			line := findLogLine(t, e.log.String(), "egress")
			if line["decision"] != DecisionDeny || line["reason"] != c.reason {
				t.Errorf("logged %v/%v, want deny/%s", line["decision"], line["reason"], c.reason)
			}
			if d := e.dialer.addresses(); len(d) != 0 {
				t.Errorf("dialled %v", d)
			}
			if got := e.resolver.total() > 0; got != c.resolves {
				t.Errorf("resolved = %v, want %v", got, c.resolves)
			}
		})
	}
}

// TestBlockedAddressesThroughProxy: with the production policy, a listed
// name resolving into any refused range is refused and never dialled.
func TestBlockedAddressesThroughProxy(t *testing.T) {
	for _, addr := range []string{
		"127.0.0.1", "169.254.169.254", "10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1",
		"::1", "fe80::1", "fd00::1", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "0.0.0.0", "::",
		"224.0.0.1", "255.255.255.255", "ff02::1", "64:ff9b::a9fe:a9fe", "2002:a00:1::1",
	} {
		t.Run(addr, func(t *testing.T) {
			e := newEnv(t, func(o *Options) { o.UnsafeAllowPrefixes = nil })
			e.resolver.set("mapped.bank.example", addr)
			e.store.Set(plugins.AllowLists{"x": {"mapped.bank.example:443"}})
			resp, _ := e.connect(http.MethodConnect, "mapped.bank.example:443", basic(ProxyUser, tokenX))
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("status = %d, want 403", resp.StatusCode)
			}
			if d := e.dialer.addresses(); len(d) != 0 {
				t.Errorf("dialled %v", d)
			}
		})
	}
}

// TestMixedAnswerRefused: one refused address among public ones refuses the
// name: it is not an institution's.
func TestMixedAnswerRefused(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.UnsafeAllowPrefixes = nil })
	e.resolver.set("mixed.bank.example", "93.184.216.34", "169.254.169.254")
	e.store.Set(plugins.AllowLists{"x": {"mixed.bank.example:443"}})
	resp, _ := e.connect(http.MethodConnect, "mixed.bank.example:443", basic(ProxyUser, tokenX))
	if resp.StatusCode != http.StatusForbidden || len(e.dialer.addresses()) != 0 {
		t.Fatalf("status %d, dialled %v", resp.StatusCode, e.dialer.addresses())
	}
}

// TestNoRebinding: the proxy resolves once per CONNECT and dials exactly the
// address it checked. The resolver answers a public address first and
// loopback afterwards; the dialer sends the public address to the echo
// server, standing in for the internet, with the production policy.
func TestNoRebinding(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.UnsafeAllowPrefixes = nil })
	e.resolver.set("rebind.bank.example", "93.184.216.34")
	e.resolver.set("rebind.bank.example", "127.0.0.1")
	e.store.Set(plugins.AllowLists{"x": {"rebind.bank.example:" + e.echoPort}})
	public := "93.184.216.34:" + e.echoPort
	e.dialer.redirect[public] = e.echoAddr

	c := e.tunnel(tokenX, "rebind.bank.example:"+e.echoPort)
	echoOnce(t, c, "hello")
	if n := e.resolver.lookups["rebind.bank.example"]; n != 1 {
		t.Errorf("lookups = %d, want 1", n)
	}
	if got := e.dialer.addresses(); !slices.Equal(got, []string{public}) {
		t.Errorf("dialled %v, want [%s]", got, public)
	}

	// The next CONNECT looks up again, sees loopback and refuses it.
	resp, _ := e.connect(http.MethodConnect, "rebind.bank.example:"+e.echoPort, basic(ProxyUser, tokenX))
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("after rebinding: status %d, want 403", resp.StatusCode)
	}
	if got := e.dialer.addresses(); len(got) != 1 {
		t.Errorf("dialled %v after rebinding", got)
	}
}

// TestAbsoluteLookups is a regression test: the
// proxy asked the resolver for "api.bank.example" without a trailing dot,
// so a pod's resolver tried "api.bank.example.openfief.svc.cluster.local"
// first, and a Service named like that took the tunnel. Now the proxy asks
// only the absolute name, and a name in the cluster's own domain is refused
// before any lookup.
func TestAbsoluteLookups(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.UnsafeAllowPrefixes = nil; o.ClusterDomain = "k8s.example.com" })
	e.resolver.set("abs.bank.example", "93.184.216.34")
	e.resolver.set("abs.bank.example."+podSearchDomain, "93.184.216.35")
	e.store.Set(plugins.AllowLists{"x": {"abs.bank.example:" + e.echoPort, "api.ns.svc.k8s.example.com:" + e.echoPort}})
	public := "93.184.216.34:" + e.echoPort
	e.dialer.redirect[public] = e.echoAddr

	c := e.tunnel(tokenX, "abs.bank.example:"+e.echoPort)
	echoOnce(t, c, "hello")
	if got := e.dialer.addresses(); !slices.Equal(got, []string{public}) {
		t.Errorf("dialled %v, want [%s] (the absolute name's address)", got, public)
	}
	if n := e.resolver.lookups["abs.bank.example."+podSearchDomain]; n != 0 {
		t.Errorf("the search-domain name was asked %d times, want 0", n)
	}

	before := e.resolver.total()
	resp, _ := e.connect(http.MethodConnect, "api.ns.svc.k8s.example.com:"+e.echoPort, basic(ProxyUser, tokenX))
	if resp.StatusCode != http.StatusForbidden || e.resolver.total() != before {
		t.Errorf("a name in the cluster domain: status %d, lookups %d; want 403 and none", resp.StatusCode, e.resolver.total()-before)
	}
}

// TestNextAddressOnDialFailure: when the first address refuses the
// connection, the next checked address is tried, and nothing else.
func TestNextAddressOnDialFailure(t *testing.T) {
	e := newEnv(t, nil)
	// Nothing listens on 127.0.0.2: the echo server is bound to 127.0.0.1.
	e.resolver.set("multi.bank.example", "127.0.0.2", "127.0.0.1")
	e.store.Set(plugins.AllowLists{"x": {"multi.bank.example:" + e.echoPort}})
	c := e.tunnel(tokenX, "multi.bank.example:"+e.echoPort)
	echoOnce(t, c, "second address")
	want := []string{"127.0.0.2:" + e.echoPort, "127.0.0.1:" + e.echoPort}
	if got := e.dialer.addresses(); !slices.Equal(got, want) {
		t.Errorf("dialled %v, want %v", got, want)
	}
}

// TestRevocationClosesTunnels: a host leaving a plugin's list closes that
// plugin's tunnels to it and nothing else; the plugin's list going closes
// all of its tunnels.
func TestRevocationClosesTunnels(t *testing.T) {
	e := newEnv(t, nil)
	p := e.echoPort
	api := e.tunnel(tokenX, "api.bank.example:"+p)
	files := e.tunnel(tokenX, "files.bank.example:"+p)
	other := e.tunnel(tokenY, "other.example:"+p)
	echoOnce(t, api, "before")

	e.store.Set(plugins.AllowLists{
		"x": {"files.bank.example:" + p},
		"y": {"other.example:" + p},
	})
	waitClosed(t, api, 2*time.Second)
	echoOnce(t, files, "still open")
	echoOnce(t, other, "still open")

	e.store.Set(plugins.AllowLists{"y": {"other.example:" + p}})
	waitClosed(t, files, 2*time.Second)
	echoOnce(t, other, "still open")

	e.store.Set(nil) // the ConfigMap went away: fail closed
	waitClosed(t, other, 2*time.Second)

	e.waitOpenTunnels(t, 0, "tunnels released")
	if n := strings.Count(e.log.String(), `"reason":"revoked"`); n != 3 {
		t.Errorf("%d revoked lines, want 3:\n%s", n, e.log.String())
	}
}

// TestTunnelCaps: a plugin over its cap gets 429 without touching another
// plugin; the proxy over its total cap gets 503.
func TestTunnelCaps(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxTunnelsPerPlugin = 2; o.MaxTunnels = 3 })
	p := e.echoPort
	a := e.tunnel(tokenX, "api.bank.example:"+p)
	e.tunnel(tokenX, "files.bank.example:"+p)
	resp, _ := e.connect(http.MethodConnect, "api.bank.example:"+p, basic(ProxyUser, tokenX))
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third tunnel of x: status %d, want 429", resp.StatusCode)
	}
	e.tunnel(tokenY, "other.example:"+p)
	resp, _ = e.connect(http.MethodConnect, "other.example:"+p, basic(ProxyUser, tokenY))
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("fourth tunnel: status %d, want 503", resp.StatusCode)
	}
	mustClose(t, a)
	e.waitOpenTunnels(t, 2, "a slot to free up")
	echoOnce(t, e.tunnel(tokenX, "api.bank.example:"+p), "slot reused")
}

// TestIdleTimeout: a silent tunnel closes after the idle timeout; one that
// keeps talking does not.
func TestIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	e := newEnv(t, func(o *Options) { o.IdleTimeout = idle })
	silent := e.tunnel(tokenX, "api.bank.example:"+e.echoPort)
	busy := e.tunnel(tokenX, "files.bank.example:"+e.echoPort)
	start := time.Now()
	for time.Since(start) < 3*idle {
		echoOnce(t, busy, "ping")
		time.Sleep(idle / 4)
	}
	waitClosed(t, silent, 2*time.Second)
	echoOnce(t, busy, "still open")
	if !strings.Contains(e.log.String(), `"reason":"idle_timeout"`) {
		t.Errorf("no idle_timeout line:\n%s", e.log.String())
	}
}

// TestBufferedBytesForwarded: bytes the client sends right behind its
// CONNECT, before the 200 (as some TLS clients do), reach the host.
func TestBufferedBytesForwarded(t *testing.T) {
	e := newEnv(t, nil)
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, c)
	target := "api.bank.example:" + e.echoPort
	if _, err := io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nProxy-Authorization: "+basic(ProxyUser, tokenX)+"\r\n\r\nearly bytes"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	want := "HTTP/1.1 200 Connection established\r\n\r\nearly bytes"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != want {
		t.Fatalf("got %q, %v", got, err)
	}
}

// TestAccessLogNeverHasToken runs allowed and refused requests, one with a
// reviewer that puts the token in its error, and checks the log has no token
// and no Proxy-Authorization value.
func TestAccessLogNeverHasToken(t *testing.T) {
	e := newEnv(t, nil)
	p := e.echoPort
	echoOnce(t, e.tunnel(tokenX, "api.bank.example:"+p), "x")
	for _, tok := range []string{tokenX, tokenBroken, tokenCore, tokenOtherNS} {
		e.connect(http.MethodConnect, "evil.example:"+p, basic(ProxyUser, tok))
		e.connect(http.MethodConnect, "api.bank.example:"+p, basic("someone", tok))
		e.connect(http.MethodConnect, "api.bank.example:"+p, basic(ProxyUser, tok))
	}
	e.store.Set(nil)
	e.waitOpenTunnels(t, 0, "tunnels closed")
	log := e.log.String()
	for _, tok := range []string{tokenX, tokenBroken, tokenCore, tokenOtherNS, "SECRET", basic(ProxyUser, tokenX)[6:]} {
		if strings.Contains(log, tok) {
			t.Errorf("log contains %q:\n%s", tok, log)
		}
	}
	if !strings.Contains(log, "[redacted]") {
		t.Error("the broken reviewer's error was not logged redacted")
	}
}

// TestShutdownClosesTunnels: Shutdown waits, then closes what is still open
// and refuses new tunnels.
func TestShutdownClosesTunnels(t *testing.T) {
	e := newEnv(t, nil)
	c := e.tunnel(tokenX, "api.bank.example:"+e.echoPort)
	ctx, cancel := contextWithTimeout(100 * time.Millisecond)
	defer cancel()
	if err := e.proxy.Shutdown(ctx); err == nil {
		t.Error("Shutdown returned nil with a tunnel open past the deadline")
	}
	waitClosed(t, c, 2*time.Second)
	resp, _ := e.connect(http.MethodConnect, "api.bank.example:"+e.echoPort, basic(ProxyUser, tokenX))
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("after shutdown: status %d, want 503", resp.StatusCode)
	}
}

// TestRevocationDuringShutdown is a regression test:
// Shutdown stopped listening to allow-list changes before waiting for the
// tunnels, so a host revoked during the grace period (up to 20 s on every
// rolling restart) stayed reachable. Now the tunnel closes as soon as its
// host is revoked, grace period or not.
func TestRevocationDuringShutdown(t *testing.T) {
	e := newEnv(t, nil)
	c := e.tunnel(tokenX, "api.bank.example:"+e.echoPort)
	echoOnce(t, c, "before")
	ctx, cancel := contextWithTimeout(time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.proxy.Shutdown(ctx) }()
	testutil.Eventually(t, 5*time.Second, "the proxy refuses new tunnels", func() (bool, string) {
		resp, _ := e.connect(http.MethodConnect, "api.bank.example:"+e.echoPort, basic(ProxyUser, tokenX))
		return resp.StatusCode == http.StatusServiceUnavailable, fmt.Sprintf("status %d", resp.StatusCode)
	})
	e.store.Set(plugins.AllowLists{"y": {"other.example:" + e.echoPort}})
	waitClosed(t, c, 2*time.Second)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown: %v, want nil once the revoked tunnel closed", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("Shutdown still waiting after the last tunnel closed")
	}
}

func TestAddressPolicy(t *testing.T) {
	blocked := []string{
		"0.0.0.0", "0.1.2.3", "10.1.2.3", "100.64.0.1", "100.127.255.255", "127.0.0.1", "127.255.255.254",
		"169.254.169.254", "169.254.0.1", "172.16.0.1", "172.31.255.255", "192.0.0.8", "192.0.2.1",
		"192.168.0.1", "198.18.0.1", "198.51.100.1", "203.0.113.9", "224.0.0.1", "239.255.255.250",
		"240.0.0.1", "255.255.255.255",
		"::", "::1", "::127.0.0.1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254",
		"fe80::1", "fe80::1%eth0", "fd00::1", "fc00::1", "fec0::1", "ff02::1", "ff0e::1",
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::808:808", "2002:7f00:1::1", "2002:a9fe:a9fe::1",
		"2001::1", "2001:db8::1", "100::1", "3fff::1", "::ffff:0:a00:1",
		// A cloud's host endpoint, plain, mapped and in NAT64 and 6to4 form
		// (Azure's wire server).
		"168.63.129.16", "::ffff:168.63.129.16", "64:ff9b::a83f:8110", "2002:a83f:8110::1",
	}
	allowed := []string{
		"8.8.8.8", "93.184.216.34", "1.1.1.1", "168.63.129.15", "168.63.129.17", "100.63.255.255", "100.128.0.1", "172.32.0.1", "223.255.255.255",
		"2606:4700:4700::1111", "2a00:1450:4001::200e", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1",
	}
	var p addressPolicy
	for _, s := range blocked {
		if _, why := p.check(netip.MustParseAddr(s)); why == "" {
			t.Errorf("%s allowed, want refused", s)
		}
	}
	for _, s := range allowed {
		if _, why := p.check(netip.MustParseAddr(s)); why != "" {
			t.Errorf("%s refused (%s), want allowed", s, why)
		}
	}
	if _, why := p.check(netip.Addr{}); why == "" {
		t.Error("the zero address is allowed")
	}
	testOnly := addressPolicy{allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	if a, why := testOnly.check(netip.MustParseAddr("::ffff:127.0.0.1")); why != "" || a != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("test policy: %v %q", a, why)
	}
	if _, why := testOnly.check(netip.MustParseAddr("10.0.0.1")); why == "" {
		t.Error("test policy allows 10.0.0.1")
	}
}

// TestDefaultDialerRechecks: the default dialer refuses a refused address
// even when asked for it directly.
func TestDefaultDialerRechecks(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Dialer = nil; o.UnsafeAllowPrefixes = nil })
	_, err := e.proxy.opts.Dialer.DialContext(t.Context(), "tcp", e.echoAddr)
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("dial %s: %v, want a refusal", e.echoAddr, err)
	}
}
