package cosign

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestRedirectIntoLoopbackRefused is a regression test: a remote registry
// answered with a redirect to plain HTTP on the operator's own loopback, and
// the loopback service's body appeared in the verification error. The chain
// starts at "registry.example" (an HTTPS server this test reaches through its
// own dialer); every redirect it sends towards loopback is refused before
// anything is dialled.
func TestRedirectIntoLoopbackRefused(t *testing.T) {
	var secretHits atomic.Int64
	secret := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		secretHits.Add(1)
		_, _ = w.Write([]byte("node-local-secret"))
	}))
	defer secret.Close()
	secretTLS := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		secretHits.Add(1)
		_, _ = w.Write([]byte("node-local-secret"))
	}))
	defer secretTLS.Close()

	for name, target := range map[string]string{
		"plain http to 127.0.0.1":  secret.URL + "/v2/",
		"https to 127.0.0.1":       secretTLS.URL + "/v2/",
		"https to localhost":       strings.Replace(secretTLS.URL, "127.0.0.1", "localhost", 1) + "/v2/",
		"https to a private range": "https://10.0.0.7/v2/",
		"https to link-local":      "https://169.254.169.254/latest/",
	} {
		t.Run(name, func(t *testing.T) {
			remote := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target, http.StatusTemporaryRedirect)
			}))
			defer remote.Close()
			client := &http.Client{Transport: &guardedTransport{base: dialAs(remote, "registry.example:443"), insecure: map[string]bool{}, maxBody: 1 << 20}}
			resp, err := client.Get("https://registry.example/v2/")
			if err == nil {
				resp.Body.Close()
				t.Fatalf("the redirect to %s was followed (status %d)", target, resp.StatusCode)
			}
			if !strings.Contains(err.Error(), "refusing the redirect") || strings.Contains(err.Error(), "node-local-secret") {
				t.Fatalf("err = %v", err)
			}
			if n := secretHits.Load(); n != 0 {
				t.Fatalf("the loopback service was reached %d times", n)
			}
		})
	}
}

// TestRedirectSafeDialer: for a redirected request, a name that resolves to
// loopback is refused at the dial; an ordinary request dials as before.
func TestRedirectSafeDialer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }() // ends the accept loop
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close() // only the dial is under test
		}
	}()
	dial := redirectSafeDialer((&net.Dialer{}).DialContext)
	marked := context.WithValue(context.Background(), publicOnlyKey{}, true)
	if c, err := dial(marked, "tcp", ln.Addr().String()); err == nil {
		_ = c.Close() // the test fails either way
		t.Fatal("a redirected request dialled loopback")
	}
	c, err := dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("an ordinary dial: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRegistryErrorBodiesStayOut: what a registry writes in an error body
// never reaches the verification error, which the operator copies into a
// Plugin's condition; the status and diagnostic codes do.
func TestRegistryErrorBodiesStayOut(t *testing.T) {
	k := cosigntest.NewKeyless(t, testIssuer, testSubject)
	for name, status := range map[string]int{"refused (unavailable)": http.StatusForbidden, "not found (invalid image)": http.StatusNotFound} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				_, _ = w.Write([]byte(`{"errors":[{"code":"DENIED","message":"leak-me <script>","detail":"leak-me"}]}`))
			}))
			defer srv.Close()
			ref := mustRef(t, strings.TrimPrefix(srv.URL, "http://")+"/plugins/fx@sha256:"+strings.Repeat("ab", 32))
			_, _, err := newVerifier(t, k).Verify(context.Background(), ref)
			if err == nil {
				t.Fatal("verified")
			}
			if strings.Contains(err.Error(), "leak-me") {
				t.Fatalf("the registry's body is in the error: %v", err)
			}
			if !strings.Contains(err.Error(), "DENIED") {
				t.Errorf("err = %v, want the diagnostic code", err)
			}
			var re *RegistryError
			if status == http.StatusForbidden && (!errors.As(err, &re) || re.StatusCode != status) {
				t.Errorf("err = %#v, want a *RegistryError with status %d", err, status)
			}
		})
	}
}

// dialAs returns a transport that reaches srv whatever host it is asked
// for, trusting srv's certificate for the name host.
func dialAs(srv *httptest.Server, host string) http.RoundTripper {
	tr := srv.Client().Transport.(*http.Transport).Clone()
	// httptest's certificate is for example.com (and 127.0.0.1).
	tr.TLSClientConfig = &tls.Config{RootCAs: tr.TLSClientConfig.RootCAs, ServerName: "example.com"}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != host {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}
		return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
	}
	return tr
}
