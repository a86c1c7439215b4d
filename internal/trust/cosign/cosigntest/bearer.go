package cosigntest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TokenRegistry is a Registry that, once locked, requires a bearer token
// from its token endpoint, the distribution token flow: the
// registry answers 401 with a WWW-Authenticate Bearer challenge naming the
// endpoint, a second loopback server that hands out a token for the right
// basic credentials only, and accepts only "Authorization: Bearer <token>".
// Blob reads are redirected to a third loopback server, its blob store,
// which counts the requests that carried any Authorization header: neither
// the basic credentials nor the token are for it.
type TokenRegistry struct {
	*Registry
	User, Password string
	realmHost      atomic.Pointer[string]
	token          string
	tokens         *httptest.Server
	tokenRequests  atomic.Int64
	tokenAuth      atomic.Int64
	tokenIssued    atomic.Int64
	store          *httptest.Server
	storeRequests  atomic.Int64
	storeAuth      atomic.Int64
}

// TokenService is the service the registry's challenge names.
const TokenService = "cosigntest-registry"

// NewTokenRegistry starts a token-protected registry closed when t ends.
// Push and sign first, anonymously; then Lock it.
func NewTokenRegistry(t testing.TB, user, password string) *TokenRegistry {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	p := &TokenRegistry{Registry: NewRegistry(t, true), User: user, Password: password, token: "tok-" + hex.EncodeToString(b)}
	p.tokens = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		p.tokenRequests.Add(1)
		if req.Header.Get("Authorization") != "" {
			p.tokenAuth.Add(1)
		}
		u, pw, ok := req.BasicAuth()
		if !ok || u != p.User || pw != p.Password || req.URL.Query().Get("service") != TokenService {
			w.Header().Set("WWW-Authenticate", `Basic realm="cosigntest-token"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		p.tokenIssued.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"token": p.token, "access_token": p.token, "expires_in": 300})
	}))
	t.Cleanup(p.tokens.Close)
	_, port, _ := strings.Cut(strings.TrimPrefix(p.tokens.URL, "http://"), ":")
	p.SetRealmHost("localhost:" + port)
	p.store = newBlobStore(t, p.URL, "Bearer "+p.token, &p.storeRequests, &p.storeAuth)
	return p
}

// newBlobStore starts a loopback server that serves upstream's blobs to
// anyone, forwarding with authorization and the viaStore header, and counts
// its requests and those that carried an Authorization header.
func newBlobStore(t testing.TB, upstream func() string, authorization string, requests, authorized *atomic.Int64) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		requests.Add(1)
		if req.Header.Get("Authorization") != "" {
			authorized.Add(1)
		}
		fwd, err := http.NewRequestWithContext(req.Context(), req.Method, upstream()+req.URL.Path, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fwd.Header.Set(viaStore, "1")
		fwd.Header.Set("Authorization", authorization)
		resp, err := http.DefaultClient.Do(fwd)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for _, h := range []string{"Content-Type", "Content-Length", "Docker-Content-Digest"} {
			if v := resp.Header.Get(h); v != "" {
				w.Header().Set(h, v)
			}
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(s.Close)
	return s
}

// Lock makes the registry require the token and redirect blob reads to its
// blob store.
func (p *TokenRegistry) Lock() {
	p.Gate(func(w http.ResponseWriter, req *http.Request) bool {
		if req.Header.Get("Authorization") != "Bearer "+p.token {
			scope := "registry:catalog:*"
			if repo, _, ok := strings.Cut(strings.TrimPrefix(req.URL.Path, "/v2/"), "/manifests/"); ok {
				scope = "repository:" + repo + ":pull"
			} else if repo, _, ok := strings.Cut(strings.TrimPrefix(req.URL.Path, "/v2/"), "/blobs/"); ok {
				scope = "repository:" + repo + ":pull"
			}
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm=%q,service=%q,scope=%q`, "http://"+p.RealmHost()+"/token", TokenService, scope))
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return true
		}
		if req.Header.Get(viaStore) == "" && strings.Contains(req.URL.Path, "/blobs/") && (req.Method == http.MethodGet || req.Method == http.MethodHead) {
			http.Redirect(w, req, p.store.URL+req.URL.Path, http.StatusTemporaryRedirect)
			return true
		}
		return false
	})
}

// RealmHost is the host:port the challenge's realm names for the token
// endpoint: "localhost:<port>" by default, another host than the registry's
// 127.0.0.1:<port>. go-containerregistry refuses a realm at a loopback or
// private IP literal other than the registry's own host:port (an SSRF
// guard), so by default the token endpoint is named by name.
func (p *TokenRegistry) RealmHost() string { return *p.realmHost.Load() }

// SetRealmHost makes later challenges name host:port for the token endpoint.
func (p *TokenRegistry) SetRealmHost(host string) { p.realmHost.Store(&host) }

// TokenHost is the token endpoint's host:port, 127.0.0.1:<port>.
func (p *TokenRegistry) TokenHost() string { return strings.TrimPrefix(p.tokens.URL, "http://") }

// TokenRequests is how many requests the token endpoint served.
func (p *TokenRegistry) TokenRequests() int64 { return p.tokenRequests.Load() }

// TokenAuthorized is how many of them carried an Authorization header.
func (p *TokenRegistry) TokenAuthorized() int64 { return p.tokenAuth.Load() }

// TokensIssued is how many tokens the endpoint handed out.
func (p *TokenRegistry) TokensIssued() int64 { return p.tokenIssued.Load() }

// StoreRequests is how many requests the blob store served.
func (p *TokenRegistry) StoreRequests() int64 { return p.storeRequests.Load() }

// StoreAuthorized is how many of them carried an Authorization header.
func (p *TokenRegistry) StoreAuthorized() int64 { return p.storeAuth.Load() }

// StoreHost is the blob store's host:port.
func (p *TokenRegistry) StoreHost() string { return strings.TrimPrefix(p.store.URL, "http://") }
