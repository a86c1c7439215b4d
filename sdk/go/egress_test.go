// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// connectProxy is a real HTTP CONNECT proxy on loopback that records the
// Proxy-Authorization of every CONNECT, like the egress proxy checks it.
type connectProxy struct {
	srv    *httptest.Server
	refuse bool // answer 407 to every CONNECT

	mu       sync.Mutex
	auths    []string
	requests int // every request, CONNECT or not
}

func startConnectProxy(t *testing.T) *connectProxy {
	t.Helper()
	p := &connectProxy{}
	p.srv = httptest.NewServer(p)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *connectProxy) url() *url.URL {
	u, _ := url.Parse(p.srv.URL)
	return u
}

func (p *connectProxy) seen() ([]string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.auths...), p.requests
}

func (p *connectProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.requests++
	if r.Method == http.MethodConnect {
		p.auths = append(p.auths, r.Header.Get("Proxy-Authorization"))
	}
	p.mu.Unlock()
	if r.Method != http.MethodConnect {
		http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
		return
	}
	if p.refuse {
		w.Header().Set("Proxy-Authenticate", `Basic realm="egress"`)
		http.Error(w, "no", http.StatusProxyAuthRequired)
		return
	}
	dst, err := net.Dial("tcp", r.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		_ = dst.Close() // the tunnel never opened: nothing was written to lose
		return
	}
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		_ = conn.Close()
		_ = dst.Close()
		return
	}
	go pipe(dst, buf.Reader, conn)
	go pipe(conn, dst, dst)
}

// pipe copies src to dst, then closes both ends of the tunnel. Errors only
// end the tunnel: the client under test sees them as a closed connection.
func pipe(dst io.WriteCloser, src io.Reader, other io.Closer) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = other.Close()
}

// institution is an HTTPS server standing in for a bank's API.
func institution(t *testing.T) (*httptest.Server, *[]http.Header) {
	t.Helper()
	var mu sync.Mutex
	var headers []http.Header
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		headers = append(headers, r.Header.Clone())
		mu.Unlock()
		if _, err := io.WriteString(w, "rates"); err != nil {
			t.Errorf("institution: write response: %v", err)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &headers
}

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// trusting makes t's base transport trust the test institution's
// certificate, as the system roots trust a real bank's.
func trusting(tr *EgressTransport, srv *httptest.Server) *EgressTransport {
	tr.base.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	return tr
}

func TestEgressTransportAuthenticatesWithTheCurrentToken(t *testing.T) {
	proxy := startConnectProxy(t)
	bank, bankHeaders := institution(t)
	tokenPath := filepath.Join(t.TempDir(), "egress-token")
	tokens := mustTokenFile(t, tokenPath, "egress-token-1\n")
	client := &http.Client{Transport: trusting(NewEgressTransport(proxy.url(), tokens), bank)}

	get := func() {
		t.Helper()
		resp, err := client.Get(bank.URL + "/rates")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "rates" {
			t.Fatalf("body %q", body)
		}
	}
	get()
	auths, _ := proxy.seen()
	if len(auths) != 1 || auths[0] != basic("plugin", "egress-token-1") {
		t.Fatalf("proxy saw %q, want one CONNECT with plugin:egress-token-1", auths)
	}

	// The kubelet rotates the token: the next request opens a new tunnel
	// with the new token, without a new client.
	writeFile(t, tokenPath, "egress-token-2")
	get()
	auths, _ = proxy.seen()
	if len(auths) != 2 || auths[1] != basic("plugin", "egress-token-2") {
		t.Fatalf("proxy saw %q, want a second CONNECT with plugin:egress-token-2", auths)
	}
	for _, h := range *bankHeaders {
		if h.Get("Proxy-Authorization") != "" || h.Get("Authorization") != "" {
			t.Fatal("the institution received a credential")
		}
	}
}

func TestEgressTransportRefuses(t *testing.T) {
	proxy := startConnectProxy(t)
	bank, _ := institution(t)
	tokens := mustTokenFile(t, filepath.Join(t.TempDir(), "egress-token"), "secret-egress-token")

	t.Run("plain http", func(t *testing.T) {
		client := &http.Client{Transport: NewEgressTransport(proxy.url(), tokens)}
		plain := strings.Replace(bank.URL, "https://", "http://", 1)
		resp, err := client.Get(plain)
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, ErrPlainHTTP) {
			t.Fatalf("GET %s = %v, want ErrPlainHTTP", plain, err)
		}
		if _, n := proxy.seen(); n != 0 {
			t.Fatal("a plain http request reached the proxy")
		}
	})
	t.Run("redirect to plain http", func(t *testing.T) {
		redirecting := httptest.NewTLSServer(http.RedirectHandler("http://127.0.0.1:1/", http.StatusFound))
		defer redirecting.Close()
		client := &http.Client{Transport: trusting(NewEgressTransport(proxy.url(), tokens), redirecting)}
		resp, err := client.Get(redirecting.URL)
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, ErrPlainHTTP) {
			t.Fatalf("GET = %v, want ErrPlainHTTP", err)
		}
	})
	t.Run("no proxy", func(t *testing.T) {
		client := &http.Client{Transport: trusting(NewEgressTransport(nil, tokens), bank)}
		resp, err := client.Get(bank.URL)
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, ErrNoEgressProxy) {
			t.Fatalf("GET = %v, want ErrNoEgressProxy", err)
		}
	})
	t.Run("no token", func(t *testing.T) {
		before, _ := proxy.seen()
		absent, err := NewTokenFile(filepath.Join(t.TempDir(), "absent"))
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: trusting(NewEgressTransport(proxy.url(), absent), bank)}
		resp, err := client.Get(bank.URL)
		if err == nil {
			resp.Body.Close()
			t.Fatal("GET without an egress token succeeded")
		}
		if after, _ := proxy.seen(); len(after) != len(before) {
			t.Fatal("a CONNECT without a token reached the proxy")
		}
	})
	t.Run("proxy refuses: error hides the token", func(t *testing.T) {
		refusing := startConnectProxy(t)
		refusing.refuse = true
		client := &http.Client{Transport: trusting(NewEgressTransport(refusing.url(), tokens), bank)}
		resp, err := client.Get(bank.URL)
		if err == nil {
			resp.Body.Close()
			t.Fatal("GET through a refusing proxy succeeded")
		}
		if strings.Contains(err.Error(), "secret-egress-token") || strings.Contains(err.Error(), base64.StdEncoding.EncodeToString([]byte("plugin:secret-egress-token"))) {
			t.Fatalf("error %q contains the token", err)
		}
	})
}

func TestNewEgressClient(t *testing.T) {
	proxy := startConnectProxy(t)
	bank, _ := institution(t)
	tokenPath := filepath.Join(t.TempDir(), "egress-token")
	writeFile(t, tokenPath, "egress-env-token")

	t.Setenv(EnvHTTPSProxy, "")
	t.Setenv(EnvEgressTokenFile, tokenPath)
	if _, err := NewEgressClient(); !errors.Is(err, ErrNoEgressProxy) {
		t.Fatalf("without HTTPS_PROXY: %v, want ErrNoEgressProxy", err)
	}
	for _, bad := range []string{"ftp://10.0.0.1:21", "http://user:pw@10.0.0.1:3128", "http://10.0.0.1:3128/path", "10.0.0.1:3128", "http://"} {
		t.Setenv(EnvHTTPSProxy, bad)
		if _, err := NewEgressClient(); err == nil {
			t.Fatalf("HTTPS_PROXY=%q accepted", bad)
		}
	}
	t.Setenv(EnvHTTPSProxy, proxy.srv.URL)
	t.Setenv(EnvEgressTokenFile, "")
	if _, err := NewEgressClient(); err == nil {
		t.Fatal("without OPENFIEF_EGRESS_TOKEN_FILE: accepted")
	}
	t.Setenv(EnvEgressTokenFile, tokenPath)
	client, err := NewEgressClient()
	if err != nil {
		t.Fatal(err)
	}
	trusting(client.Transport.(*EgressTransport), bank)
	resp, err := client.Get(bank.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if auths, _ := proxy.seen(); len(auths) != 1 || auths[0] != basic("plugin", "egress-env-token") {
		t.Fatalf("proxy saw %q", auths)
	}
}
