package proxyserver

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/arkadiuss/openfief/internal/egress"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// The API server is client-go's fake clientset here: these tests check the
// wiring (which adapters, limits and endpoints Start assembles), not the
// adapters, which internal/egress/kube tests on a real API server.

// pluginToken is shaped like a projected ServiceAccount token (a JWT whose
// exp is in the future), which the caching reviewer asks for before any
// review; the fake TokenReview API accepts it for plugin fx.
var pluginToken = "e30." + base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"exp":%d}`, time.Now().Add(time.Hour).Unix())) + ".c2ln"

// fakeCluster is a fake API server whose TokenReview API accepts
// pluginToken for the openfief-egress audience as plugin fx, and which
// holds the allow-list ConfigMap when lists is not nil.
func fakeCluster(lists plugins.AllowLists) *fake.Clientset {
	var objs []runtime.Object
	if lists != nil {
		objs = append(objs, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: plugins.AllowListConfigMap, Namespace: plugins.Namespace},
			Data:       plugins.EncodeAllowLists(lists),
		})
	}
	cs := fake.NewClientset(objs...)
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		review := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		if review.Spec.Token == pluginToken {
			review.Status = authenticationv1.TokenReviewStatus{
				Authenticated: true,
				User:          authenticationv1.UserInfo{Username: plugins.ServiceAccountUsername("fx")},
				Audiences:     []string{plugins.AudienceEgress},
			}
		}
		return true, review, nil
	})
	return cs
}

// loopbackResolver resolves every name to 127.0.0.1.
type loopbackResolver struct{}

func (loopbackResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// testOptions are the binary's defaults on loopback, resolving every name
// to loopback, with cs as the API server.
func testOptions(cs *fake.Clientset) Options {
	o := DefaultOptions()
	o.Client = cs
	o.Listen, o.MetricsListen = "127.0.0.1:0", "127.0.0.1:0"
	o.ShutdownGrace = time.Second
	o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	o.Resolver = loopbackResolver{}
	o.UnsafeAllowPrefixes = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	return o
}

// echoServer answers every connection with what it reads, and returns its
// port.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestStart: the proxy Start assembles serves a tunnel to an allowed host
// for a token the TokenReview API accepts, refuses one without a token, and
// its ops endpoints answer: /readyz once the allow-lists are loaded,
// /metrics with the proxy's, the review cache's and the Go and process
// collectors' metrics. Stop ends it and closes its listeners.
func TestStart(t *testing.T) {
	port := echoServer(t)
	target := "api.bank.example:" + port
	s, err := Start(t.Context(), testOptions(fakeCluster(plugins.AllowLists{"fx": {target}})))
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = s.Stop()
		}
	}()
	if s.MetricsAddr() == "" {
		t.Fatal("no metrics address")
	}
	if code, _ := get(t, s.MetricsAddr(), "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	testutil.Eventually(t, 10*time.Second, "/readyz 200", func() (bool, string) {
		code, body := get(t, s.MetricsAddr(), "/readyz")
		return code == http.StatusOK, fmt.Sprint(code, " ", body)
	})
	if ready, reason := s.Ready(); !ready {
		t.Errorf("Ready: false, %q", reason)
	}

	// One tunnel, and one refusal.
	if got := connect(t, s.Addr(), target, pluginToken); got != "200" {
		t.Fatalf("CONNECT with the plugin's token: %s", got)
	}
	if got := connect(t, s.Addr(), target, ""); got != "407" {
		t.Errorf("CONNECT without a token: %s, want 407", got)
	}

	_, metrics := get(t, s.MetricsAddr(), "/metrics")
	for _, want := range []string{
		`openfief_egress_decisions_total{decision="allow",reason="allowed"} 1`,
		`openfief_egress_decisions_total{decision="deny",reason="no_credentials"} 1`,
		`openfief_egress_token_review_cache_total{result="miss"} 1`,
		`openfief_egress_token_reviews_total{result="accepted"} 1`,
		"openfief_egress_open_tunnels",
		"go_goroutines",
		"process_cpu_seconds_total",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	if err := s.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	stopped = true
	for _, addr := range []string{s.Addr(), s.MetricsAddr()} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			t.Errorf("%s still accepts after Stop", addr)
		}
	}
}

// connect sends a CONNECT for target with token (none when empty), and
// returns the status code, or after a 200 "200" only if a line goes through
// the tunnel and back.
func connect(t *testing.T, proxy, target, token string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxy, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if token != "" {
		req += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("plugin:"+token)) + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprint(resp.StatusCode)
	}
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := br.ReadString('\n'); err != nil || line != "ping\n" {
		return fmt.Sprintf("200, then %q, %v through the tunnel", line, err)
	}
	return "200"
}

// TestStartNotReady: without the allow-list ConfigMap the proxy serves but
// /readyz answers 503 with the reason, and Ready says the same.
func TestStartNotReady(t *testing.T) {
	s, err := Start(t.Context(), testOptions(fakeCluster(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Stop() }()
	testutil.Eventually(t, 10*time.Second, "/readyz to report the missing ConfigMap", func() (bool, string) {
		code, body := get(t, s.MetricsAddr(), "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "not found"), fmt.Sprint(code, " ", body)
	})
	if ready, reason := s.Ready(); ready || !strings.Contains(reason, plugins.AllowListConfigMap) {
		t.Errorf("Ready: %v, %q", ready, reason)
	}
}

// TestRun: Run serves until its context is done and then returns nil; a
// setting it cannot start with, or a listener it cannot bind, is an error
// before serving.
func TestRun(t *testing.T) {
	o := testOptions(fakeCluster(plugins.AllowLists{}))
	o.MetricsListen = ""
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = busy.Close() }()
	o.Listen = busy.Addr().String()
	if err := Run(t.Context(), o); err == nil || !strings.Contains(err.Error(), o.Listen) {
		t.Errorf("Run on a busy address: %v", err)
	}
}

// TestOptionsValidate: errors name the flag (or the field) at fault.
func TestOptionsValidate(t *testing.T) {
	tests := map[string]struct {
		change func(*Options)
		want   string // in the error; empty means valid
	}{
		"the defaults":              {func(*Options) {}, ""},
		"review cache at its cap":   {func(o *Options) { o.ReviewCacheTTL = egress.MaxReviewCacheTTL }, ""},
		"review cache disabled":     {func(o *Options) { o.ReviewCacheTTL = 0 }, ""},
		"review cache past its cap": {func(o *Options) { o.ReviewCacheTTL = egress.MaxReviewCacheTTL + time.Second }, "--review-cache-ttl: 5m1s is longer than 5m0s"},
		"no client":                 {func(o *Options) { o.Client = nil }, "Options.Client"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			o := testOptions(fakeCluster(nil))
			tt.change(&o)
			s, err := Start(t.Context(), o)
			if err == nil {
				_ = s.Stop()
			}
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Start: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Start: %v, want an error with %q", err, tt.want)
			}
		})
	}
}
