package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// FakeNBP stands in for NBP's API over HTTPS, with a certificate for
// api.nbp.pl from a CA of its own. It answers table A queries with one table
// dated the last day asked for. The end-to-end suites reach it through the
// egress proxy.
type FakeNBP struct {
	srv *http.Server
	ln  net.Listener
	dir string
	// CAFile holds its CA certificate (PEM), for SSL_CERT_FILE; CAPEM is
	// the same bytes, for an image's CA bundle.
	CAFile string
	CAPEM  []byte
	// Requests counts the requests it answered.
	Requests atomic.Int64
}

// StartFakeNBP serves the stand-in on addr (host:port; port 0 picks one).
// Close stops it.
func StartFakeNBP(addr string) (*FakeNBP, error) {
	dir, err := os.MkdirTemp("", "fake-nbp-")
	if err != nil {
		return nil, err
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "api.nbp.pl"}, DNSNames: []string{"api.nbp.pl"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(dir, "ca.pem")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	f := &FakeNBP{ln: ln, CAFile: caFile, CAPEM: caPEM, dir: dir}
	f.srv = &http.Server{
		Handler:           http.HandlerFunc(f.serve),
		ReadHeaderTimeout: 5 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}}},
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
