package e2e

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

// fakeNBP stands in for NBP's API on loopback over HTTPS, with a
// certificate for api.nbp.pl from a CA of its own. It answers table A
// queries with one table dated the last day asked for.
type fakeNBP struct {
	srv      *http.Server
	ln       net.Listener
	caFile   string
	dir      string
	requests atomic.Int64
}

func startFakeNBP() (*fakeNBP, error) {
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
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &fakeNBP{ln: ln, caFile: caFile, dir: dir}
	f.srv = &http.Server{
		Handler:           http.HandlerFunc(f.serve),
		ReadHeaderTimeout: 5 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}}},
	}
	go func() { _ = f.srv.ServeTLS(ln, "", "") }()
	return f, nil
}

// Addr is the server's loopback host:port.
func (f *fakeNBP) Addr() string { return f.ln.Addr().String() }

// Close stops the server and removes its files.
func (f *fakeNBP) Close() {
	_ = f.srv.Close()
	_ = os.RemoveAll(f.dir)
}

// serve answers GET /api/exchangerates/tables/A/{start}/{end}/ with one
// table dated end.
func (f *fakeNBP) serve(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
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
