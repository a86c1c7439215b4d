package egress

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// failingDialer records what it is asked to dial and connects nowhere.
type failingDialer struct {
	mu    sync.Mutex
	asked []string
}

func (d *failingDialer) DialContext(_ context.Context, _, address string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = append(d.asked, address)
	return nil, errors.New("fuzz: no network")
}

// FuzzServeConnect drives the whole handler with arbitrary request targets
// and Proxy-Authorization values. Whatever comes in, the proxy resolves and
// dials only when the credentials are plugin x's and the target is on x's
// list, and dials only the checked public address.
func FuzzServeConnect(f *testing.F) {
	f.Add("CONNECT", "api.bank.example:443", basic(ProxyUser, tokenX))
	f.Add("CONNECT", "API.BANK.EXAMPLE:443", basic(ProxyUser, tokenX))
	f.Add("CONNECT", "api.bank.example:443", basic(ProxyUser, tokenY))
	f.Add("CONNECT", "[::1]:443", basic(ProxyUser, tokenX))
	f.Add("CONNECT", "169.254.169.254:80", "Basic Og==")
	f.Add("GET", "http://api.bank.example/", basic(ProxyUser, tokenX))
	f.Add("CONNECT", "private.bank.example:443", basic(ProxyUser, tokenX))

	resolver := newFakeResolver()
	resolver.set("api.bank.example", "93.184.216.34")
	resolver.set("private.bank.example", "10.0.0.1")
	store := &AllowListStore{}
	store.Set(plugins.AllowLists{
		"x": {"api.bank.example:443", "private.bank.example:443"},
		"y": {"other.example:443"},
	})
	dialer := &failingDialer{}
	p, err := New(Options{
		Reviewer:   &fakeReviewer{},
		AllowLists: store,
		Resolver:   resolver,
		Dialer:     dialer,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method, target, auth string) {
		raw := method + " " + target + " HTTP/1.1\r\nHost: proxy\r\nProxy-Authorization: " + auth + "\r\n\r\n"
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return // net/http refuses it before the handler would see it
		}
		before := resolver.total()
		dialer.mu.Lock()
		dialled := len(dialer.asked)
		dialer.mu.Unlock()

		w := httptest.NewRecorder()
		p.ServeHTTP(w, req)

		switch w.Code {
		case http.StatusBadRequest, http.StatusForbidden, http.StatusMethodNotAllowed,
			http.StatusProxyAuthRequired, http.StatusServiceUnavailable, http.StatusBadGateway:
		default:
			t.Fatalf("%q: status %d", raw, w.Code)
		}
		if w.Code == http.StatusProxyAuthRequired && w.Header().Get("Proxy-Authenticate") == "" {
			t.Fatal("407 without Proxy-Authenticate")
		}
		resolved := resolver.total() > before
		dialer.mu.Lock()
		newDials := append([]string(nil), dialer.asked[dialled:]...)
		dialer.mu.Unlock()
		if !resolved && len(newDials) == 0 {
			return
		}
		token, err := parseProxyAuthorization(req.Header.Values("Proxy-Authorization"))
		canon, _, _, d := connectTarget(req.RequestURI)
		if req.Method != http.MethodConnect || err != nil || token != tokenX || d != nil ||
			(canon != "api.bank.example:443" && canon != "private.bank.example:443") {
			t.Fatalf("%q: resolved or dialled for a request that is not allowed", raw)
		}
		for _, a := range newDials {
			if a != "93.184.216.34:443" {
				t.Fatalf("%q: dialled %s", raw, a)
			}
		}
	})
}
