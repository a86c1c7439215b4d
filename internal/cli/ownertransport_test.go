package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
)

// ownerTestToken stands in for a minted owner token.
const ownerTestToken = "owner-token-must-stay-home"

// countingServer is an HTTP server on a real TCP listener that counts the
// connections it accepts and records every request's owner header and
// Authorization, and answers with handle.
type countingServer struct {
	URL   string
	conns atomic.Int64

	mu       sync.Mutex
	requests []string // "METHOD path token=... auth=..."
}

func serveCounting(t *testing.T, ip string, handle http.HandlerFunc, tlsCert *tls.Certificate) *countingServer {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	s := &countingServer{}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			s.requests = append(s.requests, fmt.Sprintf("%s %s token=%q auth=%q", r.Method, r.URL.Path, r.Header.Get(ownerapi.HeaderOwnerToken), r.Header.Get("Authorization")))
			s.mu.Unlock()
			handle(w, r)
		}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.conns.Add(1)
			}
		},
		ReadHeaderTimeout: 5 * time.Second,
	}
	scheme := "http"
	if tlsCert != nil {
		scheme = "https"
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*tlsCert}, MinVersion: tls.VersionTLS12}
		go func() { _ = srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { _ = srv.Serve(ln) }()
	}
	t.Cleanup(func() { _ = srv.Close() })
	s.URL = scheme + "://" + ln.Addr().String()
	return s
}

func (s *countingServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// answerStatus answers like the core's status endpoint.
func answerStatus(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(ownerapi.HeaderOwnerToken) != ownerTestToken {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ownerapi.InstanceStatus{Plugin: "x", Scheduled: true})
}

// redirectTo answers every request with code and Location to+path.
func redirectTo(code int, to string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", to+r.URL.Path+"?\u202egpj.exe")
		w.WriteHeader(code)
	}
}

// directAPI is coreAPI for --core-url u, minting ownerTestToken and
// counting the mints.
func directAPI(t *testing.T, u string) (*coreAPI, *atomic.Int64, error) {
	t.Helper()
	mints := &atomic.Int64{}
	api, err := (&Env{}).coreAPI(u, 5*time.Second)
	if api != nil {
		api.mint = func(context.Context) (string, error) { mints.Add(1); return ownerTestToken, nil }
	}
	return api, mints, err
}

// TestOwnerClientFollowsNoRedirect: a core address
// answering a redirect to another server, on another port, gets an error
// naming the status; the server redirected to receives no connection at
// all, so neither the owner's token nor anything else. Both the direct
// client (--core-url) and the service-proxy client (client-go's, with the
// kubeconfig's bearer token) are checked, for GET and for a POST with a
// body (307 keeps the method and body).
func TestOwnerClientFollowsNoRedirect(t *testing.T) {
	ctx := context.Background()
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprintf("--core-url answering %d", code), func(t *testing.T) {
			elsewhere := serveCounting(t, "127.0.0.1", answerStatus, nil)
			core := serveCounting(t, "127.0.0.1", redirectTo(code, elsewhere.URL), nil)
			api, _, err := directAPI(t, core.URL)
			if err != nil {
				t.Fatal(err)
			}
			_, err = api.status(ctx, "x")
			checkRedirectRefused(t, err, code)
			var out ownerapi.ImportResponse
			err = api.do(ctx, http.MethodPost, ownerapi.ImportPath("x", false), strings.NewReader("a;b\n"), nil, &out)
			checkRedirectRefused(t, err, code)
			if n := elsewhere.conns.Load(); n != 0 {
				t.Errorf("the server redirected to got %d connection(s), requests %q", n, elsewhere.seen())
			}
			if got := core.seen(); len(got) != 2 || !strings.Contains(got[0], ownerTestToken) {
				t.Errorf("the core's address saw %q, want the two requests with the token", got)
			}
		})
	}

	t.Run("service proxy answering 302", func(t *testing.T) {
		elsewhere := serveCounting(t, "127.0.0.1", answerStatus, nil)
		// client-go sends the kubeconfig's credentials over TLS only.
		cert, _ := selfSignedCert(t, "127.0.0.1")
		apiServer := serveCounting(t, "127.0.0.1", redirectTo(http.StatusFound, elsewhere.URL), &cert)
		env := &Env{Kubeconfig: writeKubeconfig(t, apiServer.URL, cert.Certificate[0]), Namespace: "openfief"}
		api, err := env.coreAPI("", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		api.mint = func(context.Context) (string, error) { return ownerTestToken, nil }
		_, err = api.status(ctx, "x")
		checkRedirectRefused(t, err, http.StatusFound)
		if n := elsewhere.conns.Load(); n != 0 {
			t.Errorf("the server redirected to got %d connection(s), requests %q", n, elsewhere.seen())
		}
		if got := apiServer.seen(); len(got) != 1 || !strings.Contains(got[0], `auth="Bearer kube-secret"`) || !strings.Contains(got[0], "/services/openfief-core:") {
			t.Errorf("the API server saw %q, want one service-proxy request with the kubeconfig's token", got)
		}
	})
}

func checkRedirectRefused(t *testing.T, err error, code int) {
	t.Helper()
	var re *errCoreRedirect
	if !errors.As(err, &re) || re.code != code {
		t.Errorf("err = %v, want the redirect %d refused", err, code)
		return
	}
	msg := err.Error()
	for _, want := range []string{fmt.Sprintf("answered %d", code), "never follows", `\u202e`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if strings.ContainsRune(msg, '\u202e') || strings.Contains(msg, ownerTestToken) {
		t.Errorf("error %q repeats the Location raw or holds the token", msg)
	}
}

// TestOwnerClientRefusesPlainHTTPElsewhere:
// --core-url http://<not loopback> is refused before a token is minted and
// before any connection: a listener of this machine's own non-loopback
// address receives nothing, and the documentation address 192.0.2.1 is
// refused as fast as the address is read. The same rule holds for the
// kubeconfig's server on the service-proxy road.
func TestOwnerClientRefusesPlainHTTPElsewhere(t *testing.T) {
	targets := []string{"http://192.0.2.1:8080", "http://[2001:db8::1]:8080", "http://example.com", "http://127.0.0.1.example.com:1", "http://user:pw@127.0.0.1:1"}
	var host *countingServer
	if ip := nonLoopbackIPv4(); ip != "" {
		host = serveCounting(t, ip, answerStatus, nil)
		targets = append(targets, host.URL)
	} else {
		t.Log("this machine has no non-loopback IPv4 address; the listener case is left out")
	}
	for _, u := range targets {
		api, mints, err := directAPI(t, u)
		if api != nil || err == nil {
			t.Errorf("--core-url %s was accepted", u)
			continue
		}
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != ExitUsage || !strings.HasPrefix(err.Error(), "--core-url ") {
			t.Errorf("--core-url %s: %v, want a usage error naming --core-url", u, err)
		}
		if !strings.Contains(u, "@") && !strings.Contains(err.Error(), ownerURLRule) {
			t.Errorf("--core-url %s: %q does not state the rule", u, err)
		}
		if strings.Contains(err.Error(), "pw") {
			t.Errorf("--core-url %s: the error repeats the URL's password: %q", u, err)
		}
		if mints != nil && mints.Load() != 0 {
			t.Errorf("--core-url %s: a token was minted", u)
		}
	}
	if host != nil && host.conns.Load() != 0 {
		t.Errorf("the non-loopback listener got %d connection(s): %q", host.conns.Load(), host.seen())
	}

	env := &Env{Kubeconfig: writeKubeconfig(t, "http://192.0.2.1:6443", nil), Namespace: "openfief"}
	if _, err := env.coreAPI("", time.Second); err == nil || !strings.Contains(err.Error(), "kubeconfig's server") || !strings.Contains(err.Error(), ownerURLRule) {
		t.Errorf("an http kubeconfig server elsewhere: %v, want it refused with the rule", err)
	}
}

// TestOwnerClientDialsLoopbackOnly: the http client's second line. A name
// such as localhost that resolved elsewhere would still connect only to a
// loopback address: the dialer refuses before connect(2).
func TestOwnerClientDialsLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:80": true, "127.8.9.10:1": true, "[::1]:80": true, "192.0.2.1:80": false, "[2001:db8::1]:80": false, "[::ffff:192.0.2.1]:80": false, "0.0.0.0:80": false} {
		err := dialLoopbackOnly("tcp", addr, nil)
		if (err == nil) != ok {
			t.Errorf("dialLoopbackOnly(%s) = %v, want allowed %v", addr, err, ok)
		}
	}
	ip := nonLoopbackIPv4()
	if ip == "" {
		t.Skip("this machine has no non-loopback IPv4 address")
	}
	host := serveCounting(t, ip, answerStatus, nil)
	api, _, err := directAPI(t, "http://localhost:1")
	if err != nil {
		t.Fatal(err)
	}
	api.base = host.URL // as if localhost had resolved to this address
	if _, err := api.status(context.Background(), "x"); !errors.Is(err, errNotLoopback) {
		t.Errorf("status through the http client to %s: %v, want %v", host.URL, err, errNotLoopback)
	}
	if n := host.conns.Load(); n != 0 {
		t.Errorf("the non-loopback listener got %d connection(s)", n)
	}
}

// TestOwnerClientOverHTTPS: https carries the token to any host, loopback
// or not; plain http to loopback too (`openfief dev`'s core).
func TestOwnerClientOverHTTPS(t *testing.T) {
	ips := []string{"127.0.0.1"}
	if ip := nonLoopbackIPv4(); ip != "" {
		ips = append(ips, ip)
	}
	for _, ip := range ips {
		cert, pool := selfSignedCert(t, ip)
		core := serveCounting(t, ip, answerStatus, &cert)
		api, mints, err := directAPI(t, core.URL)
		if err != nil {
			t.Fatalf("--core-url %s: %v", core.URL, err)
		}
		tr, ok := api.client.Transport.(*http.Transport)
		if !ok {
			t.Fatalf("the owner client's transport is %T", api.client.Transport)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		st, err := api.status(context.Background(), "x")
		if err != nil || st.Plugin != "x" || mints.Load() != 1 {
			t.Errorf("status over %s = %+v, %v (%d mints)", core.URL, st, err, mints.Load())
		}
	}
	for _, host := range []string{"127.0.0.1", "localhost", "[::1]", "127.1.2.3"} {
		if host == "[::1]" {
			ln, err := net.Listen("tcp", "[::1]:0")
			if err != nil {
				continue // no IPv6 loopback here
			}
			_ = ln.Close()
		}
		core := serveCounting(t, strings.Trim(host, "[]"), answerStatus, nil)
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(core.URL, "http://"))
		api, _, err := directAPI(t, "http://"+host+":"+port+"/")
		if err != nil {
			t.Fatalf("http to %s: %v", host, err)
		}
		if _, err := api.status(context.Background(), "x"); err != nil {
			t.Errorf("status over http to %s: %v", host, err)
		}
	}
}

// nonLoopbackIPv4 returns an IPv4 address of this machine that is not
// loopback, or "".
func nonLoopbackIPv4() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// selfSignedCert returns a certificate for ip and a pool trusting it.
func selfSignedCert(t *testing.T, ip string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP(ip)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return cert, pool
}

// writeKubeconfig writes a kubeconfig for server, trusting the DER
// certificate ca when there is one, with the bearer token kube-secret, and
// returns its path.
func writeKubeconfig(t *testing.T, server string, ca []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	caData := ""
	if ca != nil {
		caData = ", certificate-authority-data: " + base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca}))
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q%s}}]
users: [{name: u, user: {token: kube-secret}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, server, caData)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
