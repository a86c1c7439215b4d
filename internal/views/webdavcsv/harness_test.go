package webdavcsv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/net/webdav"

	"github.com/arkadiuss/openfief/internal/egress"
	"github.com/arkadiuss/openfief/internal/plugins"
	openfief "github.com/arkadiuss/openfief/sdk/go"
	viewv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1/viewv1connect"
)

// The names the tests use. davHost is the owner's server, the one host in
// the view's allow-list; otherHost is the same server under a name the
// owner did not approve.
const (
	davHost     = "dav.example.test"
	otherHost   = "other.example.test"
	davUser     = "anna"
	davPassword = "correct-horse-battery-staple"
	instance    = "webdav"
	egressToken = "egress-token-of-webdav"
	// folderPath is the owner's folder on the server; its parent exists,
	// the folder itself does not until the view creates it.
	folderPath = "/files/anna/openfief/"
)

// caFile is the PEM file of the CA that signed the test server's
// certificate; TestMain points SSL_CERT_FILE at it before anything reads
// the system roots, so the SDK's egress client (which uses them, as the
// plugin does in its image) trusts the server through the proxy.
var (
	caFile     string
	serverCert tls.Certificate
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "webdavcsv-ca")
	if err != nil {
		log.Fatal(err)
	}
	caFile, serverCert = makeCA(dir)
	if err := os.Setenv("SSL_CERT_FILE", caFile); err != nil {
		log.Fatal(err)
	}
	if err := os.Unsetenv("SSL_CERT_DIR"); err != nil {
		log.Fatal(err)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// makeCA writes a new CA's certificate to dir and returns its path and a
// certificate it signed for davHost and otherHost.
func makeCA(dir string) (string, tls.Certificate) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webdavcsv test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		log.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: davHost},
		DNSNames:  []string{davHost, otherHost},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, key.Public(), caKey)
	if err != nil {
		log.Fatal(err)
	}
	path := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		log.Fatal(err)
	}
	return path, tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}
}

// davServer is golang.org/x/net/webdav's handler on an in-memory file
// system, served over TLS, behind a small wrapper that does what the
// owner's server (Nextcloud, Apache) does around WebDAV and x/net/webdav
// does not: Basic authentication, and If-Match / If-None-Match on PUT,
// which it answers 412 when they do not hold. It also records every
// request, redirects /moved/… to the folder, and can run a hook just
// before a PUT is checked, standing in for another writer.
type davServer struct {
	t   *testing.T
	srv *httptest.Server
	fs  webdav.FileSystem
	dav *webdav.Handler

	mu       sync.Mutex
	password string
	requests []string // "METHOD path status"
	// beforePut, when set, runs once before the next PUT's preconditions
	// are checked.
	beforePut func()
}

func newDAVServer(t *testing.T) *davServer {
	t.Helper()
	d := &davServer{t: t, fs: webdav.NewMemFS(), password: davPassword}
	d.dav = &webdav.Handler{FileSystem: d.fs, LockSystem: webdav.NewMemLS()}
	for _, dir := range []string{"/files", "/files/anna"} {
		if err := d.fs.Mkdir(context.Background(), dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d.srv = httptest.NewUnstartedServer(http.HandlerFunc(d.serve))
	d.srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}}
	d.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	d.srv.StartTLS()
	t.Cleanup(d.srv.Close)
	return d
}

// port is the server's port on loopback.
func (d *davServer) port() string {
	_, port, _ := net.SplitHostPort(d.srv.Listener.Addr().String())
	return port
}

func (d *davServer) serve(w http.ResponseWriter, r *http.Request) {
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		d.mu.Lock()
		d.requests = append(d.requests, fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, rec.status))
		d.mu.Unlock()
	}()
	d.mu.Lock()
	password := d.password
	d.mu.Unlock()
	user, pass, ok := r.BasicAuth()
	if !ok || user != davUser || pass != password {
		rec.Header().Set("WWW-Authenticate", `Basic realm="webdav"`)
		http.Error(rec, "unauthorized", http.StatusUnauthorized)
		return
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/moved/"); ok {
		http.Redirect(rec, r, folderPath+rest, http.StatusMovedPermanently)
		return
	}
	if r.Method == http.MethodPut {
		d.mu.Lock()
		defer d.mu.Unlock()
		if hook := d.beforePut; hook != nil {
			d.beforePut = nil
			hook()
		}
		current := d.etag(r.URL.Path)
		if m := r.Header.Get("If-Match"); m != "" && m != current {
			http.Error(rec, "precondition failed", http.StatusPreconditionFailed)
			return
		}
		if r.Header.Get("If-None-Match") == "*" && current != "" {
			http.Error(rec, "precondition failed", http.StatusPreconditionFailed)
			return
		}
	}
	d.dav.ServeHTTP(rec, r)
}

// etag is the file's entity tag as the WebDAV handler gives it, or empty
// when there is no such file.
func (d *davServer) etag(path string) string {
	rec := httptest.NewRecorder()
	d.dav.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, path, nil))
	if rec.Code != http.StatusOK {
		return ""
	}
	return rec.Header().Get("ETag")
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// setPassword changes the password the server accepts.
func (d *davServer) setPassword(p string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.password = p
}

// log returns the requests so far and forgets them.
func (d *davServer) log() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.requests
	d.requests = nil
	return out
}

// read returns a file's content, or "" and false when there is none.
func (d *davServer) read(name string) (string, bool) {
	f, err := d.fs.OpenFile(context.Background(), name, os.O_RDONLY, 0)
	if err != nil {
		return "", false
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(f)
	if err != nil {
		d.t.Fatal(err)
	}
	return string(b), true
}

// write puts a file on the server directly, creating its folders.
func (d *davServer) write(name string, content []byte) {
	ctx := context.Background()
	parts := strings.Split(strings.Trim(filepath.Dir(name), "/"), "/")
	for i := range parts {
		_ = d.fs.Mkdir(ctx, "/"+strings.Join(parts[:i+1], "/"), 0o755)
	}
	f, err := d.fs.OpenFile(ctx, name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		d.t.Fatal(err)
	}
	if _, err := f.Write(content); err != nil {
		d.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		d.t.Fatal(err)
	}
}

// reviewer stands in for the API server's TokenReview: egressToken is the
// webdav instance's egress token, any other is refused.
type reviewer struct{}

func (reviewer) Review(_ context.Context, token string) (string, error) {
	if token == egressToken {
		return plugins.ServiceAccountUsername(instance), nil
	}
	return "", fmt.Errorf("token review: %w", egress.ErrUnauthenticated)
}

// loopback resolves every name to 127.0.0.1, where the test server is.
type loopback struct{}

func (loopback) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// startProxy runs the project's egress proxy on loopback, allowing the
// webdav instance exactly allowed (host:port entries), and points the
// SDK's environment (HTTPS_PROXY, OPENFIEF_EGRESS_TOKEN_FILE) at it.
func startProxy(t *testing.T, allowed ...string) {
	t.Helper()
	lists := &egress.AllowListStore{}
	lists.Set(plugins.AllowLists{instance: allowed})
	srv, err := egress.NewServer(egress.Config{
		Proxy: egress.Options{
			Reviewer: reviewer{}, AllowLists: lists, Resolver: loopback{},
			Logger:              slog.New(slog.NewTextHandler(io.Discard, nil)),
			DialTimeout:         5 * time.Second,
			UnsafeAllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		},
		Addr: "127.0.0.1:0",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("egress proxy: %v", err)
		}
	})
	tokenFile := filepath.Join(t.TempDir(), "egress-token")
	if err := os.WriteFile(tokenFile, []byte(egressToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(openfief.EnvHTTPSProxy, "http://"+srv.Addr().String())
	t.Setenv(openfief.EnvEgressTokenFile, tokenFile)
}

// writeCredentials writes the Secret's files into a new directory; an
// empty value leaves its file out.
func writeCredentials(t *testing.T, user, password string) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range map[string]string{"username": user, "password": password} {
		if v == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// core calls a view as the core does: gRPC over h2c, with a token signed
// by the cluster's key for the view's instance, checked by the SDK's real
// JWKSVerifier behind NewViewServer.
type core struct {
	client viewv1connect.ViewServiceClient
	token  string
	// url is where the view serves; sign signs a core token for another
	// instance's audience with the same key.
	url  string
	sign func(t *testing.T, instance string) string
}

// serveView serves v with openfief.NewViewServer on loopback until the
// test ends and returns the core's side of it.
func serveView(t *testing.T, v viewv1connect.ViewServiceHandler) *core {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	const issuer = "https://kubernetes.default.svc.cluster.local"
	dir := t.TempDir()
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: string(jose.ES256), Use: "sig"}}})
	if err := os.WriteFile(filepath.Join(dir, openfief.JWKSFileName), jwks, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, openfief.IssuerFileName), []byte(issuer), 0o644); err != nil {
		t.Fatal(err)
	}
	verifier, err := openfief.NewJWKSVerifier(dir, instance, plugins.DefaultCoreSubject)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(t *testing.T, audienceOf string) string {
		t.Helper()
		now := time.Now()
		token, err := jwt.Signed(signer).Claims(jwt.Claims{
			Issuer: issuer, Subject: plugins.DefaultCoreSubject, Audience: jwt.Audience{openfief.InstanceAudience(audienceOf)},
			Expiry: jwt.NewNumericDate(now.Add(10 * time.Minute)), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)),
			IssuedAt: jwt.NewNumericDate(now.Add(-time.Minute)),
		}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
	token := sign(t, instance)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := openfief.NewViewServer(ln.Addr().String(), v, verifier)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	client := viewv1connect.NewViewServiceClient(&http.Client{Transport: &http.Transport{Protocols: &h2c}}, "http://"+ln.Addr().String(), connect.WithGRPC())
	return &core{client: client, token: token, url: "http://" + ln.Addr().String(), sign: sign}
}

// export sends one page with the core's token.
func (c *core) export(t *testing.T, entries ...*viewv1.Entry) error {
	t.Helper()
	req := connect.NewRequest(&viewv1.ExportRequest{RunId: "run-1", DataTiers: []string{"accounts"}, Entries: entries})
	req.Header().Set("Authorization", "Bearer "+c.token)
	_, err := c.client.Export(context.Background(), req)
	return err
}

// harness is a view instance configured for folder on d, reaching it
// through the egress proxy with the SDK's egress client, served to the
// core.
type harness struct {
	dav   *davServer
	view  *View
	core  *core
	creds string
}

// setup starts the server, the proxy allowing davHost on the server's
// port, and a view for the folder URL folderURL (on host, with the
// server's port) with the right credentials.
func setup(t *testing.T, host, folder string, cfg Config) *harness {
	t.Helper()
	d := newDAVServer(t)
	startProxy(t, davHost+":"+d.port())
	client, err := openfief.NewEgressClient()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{dav: d, creds: writeCredentials(t, davUser, davPassword)}
	cfg.URL = "https://" + host + ":" + d.port() + folder
	if h.view, err = New(cfg, WithHTTPClient(client), WithCredentialsDir(h.creds)); err != nil {
		t.Fatal(err)
	}
	h.core = serveView(t, h.view)
	return h
}
