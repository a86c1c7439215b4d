package devstack

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// FakeBankHost is the name the TypeScript SDK's example connector
// (sdk/ts/examples/fx-rates) asks for by default, and FakeBank's
// certificate names.
const FakeBankHost = "rates.example-bank.test"

// FakeBankRate is one rate FakeBank answers with.
type FakeBankRate struct {
	Date     string `json:"date"`
	Currency string `json:"currency"`
	Rate     string `json:"rate"`
}

// FakeBankRates are FakeBank's rates against any quote currency, oldest
// first.
var FakeBankRates = []FakeBankRate{
	{Date: "2026-11-26", Currency: "EUR", Rate: "4.2417"},
	{Date: "2026-11-26", Currency: "USD", Rate: "3.6733"},
	{Date: "2026-11-27", Currency: "EUR", Rate: "4.2389"},
	{Date: "2026-11-27", Currency: "USD", Rate: "3.6702"},
}

// FakeBank stands in for the made-up bank of the TypeScript example
// connector, over HTTPS with a certificate for FakeBankHost from a CA of its
// own: GET /rates?quote=XXX&since=YYYY-MM-DD answers FakeBankRates dated
// after since as a JSON list of {date, currency, rate}.
type FakeBank struct {
	srv   *http.Server
	ln    net.Listener
	caPEM []byte
	// Requests counts the requests it answered.
	Requests atomic.Int64
}

// StartFakeBank serves a FakeBank on addr (host:port) until Close.
func StartFakeBank(addr string) (*FakeBank, error) {
	caPEM, cert, err := standInCert(FakeBankHost, "openfief fake bank CA")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	b := &FakeBank{ln: ln, caPEM: caPEM}
	b.srv = &http.Server{
		Handler:           http.HandlerFunc(b.serve),
		ReadHeaderTimeout: 5 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}
	go func() { _ = b.srv.ServeTLS(ln, "", "") }()
	return b, nil
}

// Addr is the server's host:port.
func (b *FakeBank) Addr() string { return b.ln.Addr().String() }

// CAPEM is the CA certificate that signed its certificate, as PEM.
func (b *FakeBank) CAPEM() []byte { return b.caPEM }

// Close stops the server.
func (b *FakeBank) Close() { _ = b.srv.Close() }

func (b *FakeBank) serve(w http.ResponseWriter, r *http.Request) {
	b.Requests.Add(1)
	if r.Method != http.MethodGet || r.URL.Path != "/rates" || len(r.URL.Query().Get("quote")) != 3 {
		http.NotFound(w, r)
		return
	}
	since := r.URL.Query().Get("since")
	out := []FakeBankRate{}
	for _, rate := range FakeBankRates {
		if rate.Date > since {
			out = append(out, rate)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
