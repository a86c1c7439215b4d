package devstack

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/arkadiuss/openfief/internal/egress"
)

// FakeNBP stands in for NBP's API over HTTPS, with a certificate for
// api.nbp.pl from a CA of its own. It answers table A queries with one table
// dated the last day asked for. The end-to-end suites and `openfief dev
// --local-plugins` (the demo, which has no internet) point the egress
// proxy's resolution of api.nbp.pl at it: on loopback, or on the real
// node's bridge address where the proxy runs as a pod's peer.
type FakeNBP struct {
	srv    *http.Server
	ln     net.Listener
	caFile string
	caPEM  []byte
	dir    string
	// Requests counts the requests it answered.
	Requests atomic.Int64
}

// StartFakeNBP serves a FakeNBP on addr (host:port; port 0 picks one; empty
// means 127.0.0.1:0) until Close.
func StartFakeNBP(addr string) (*FakeNBP, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	dir, err := os.MkdirTemp("", "fake-nbp-")
	if err != nil {
		return nil, err
	}
	caPEM, cert, err := standInCert(fakeNBPHost, "openfief fake NBP CA")
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	f := &FakeNBP{ln: ln, caFile: caFile, caPEM: caPEM, dir: dir}
	f.srv = &http.Server{
		Handler:           http.HandlerFunc(f.serve),
		ReadHeaderTimeout: 5 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
	}
	go func() { _ = f.srv.ServeTLS(ln, "", "") }()
	return f, nil
}

// Addr is the server's host:port.
func (f *FakeNBP) Addr() string { return f.ln.Addr().String() }

// Close stops the server and removes its files.
func (f *FakeNBP) Close() {
	_ = f.srv.Close()
	_ = os.RemoveAll(f.dir)
}

// serve answers GET /api/exchangerates/tables/A/{start}/{end}/ with one
// table dated end.
func (f *FakeNBP) serve(w http.ResponseWriter, r *http.Request) {
	f.Requests.Add(1)
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) != 6 || parts[0] != "api" || parts[2] != "tables" || parts[3] != "A" {
		http.NotFound(w, r)
		return
	}
	end := parts[5]
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	fmt.Fprintf(w, `[{"table":"A","no":"999/A/NBP/%s","effectiveDate":%q,"rates":[`+
		`{"currency":"dolar amerykański","code":"USD","mid":3.6589},{"currency":"euro","code":"EUR","mid":4.2301}]}]`, end[:4], end)
}

// CAFile is the PEM file of the CA that signed its certificate; a plugin
// process trusts it through SSL_CERT_FILE.
func (f *FakeNBP) CAFile() string { return f.caFile }

// CAPEM is the same CA certificate as PEM bytes, for an image's CA bundle.
func (f *FakeNBP) CAPEM() []byte { return f.caPEM }

// route is how the egress proxy reaches it (standInRoutes).
func (f *FakeNBP) route() standInRoute { return routeOf(fakeNBPHost, f.ln) }

// Resolver answers the egress proxy's lookup of api.nbp.pl with the
// server's address and of any other name with "no such host"; the proxy
// still applies its address policy to the answer (LoopbackPrefixes exempts
// loopback).
func (f *FakeNBP) Resolver() egress.Resolver {
	r, _, _ := standInRoutes(f.route()) // one route cannot collide
	return r
}

// Dialer connects the proxy's checked connection to the server's address on
// port 443 to the FakeNBP's port, and any other address as it is.
func (f *FakeNBP) Dialer() egress.Dialer {
	_, d, _ := standInRoutes(f.route())
	return d
}

const fakeNBPHost = "api.nbp.pl"
