package cosigntest

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// PrivateRegistry is a Registry that, once locked, requires basic auth on
// every request and redirects blob reads to a second loopback server, its
// blob store, as registries behind a CDN do. The blob store
// serves the blobs without credentials and counts the requests that carried
// an Authorization header, which no client may send it: the credentials are
// for the registry, not for where it redirects.
type PrivateRegistry struct {
	*Registry
	User, Password string
	store          *httptest.Server
	storeRequests  atomic.Int64
	storeAuth      atomic.Int64
}

const viaStore = "X-Cosigntest-Blob-Store"

// NewPrivateRegistry starts a private registry closed when t ends. Push and
// sign first, anonymously; then Lock it.
func NewPrivateRegistry(t testing.TB, user, password string) *PrivateRegistry {
	t.Helper()
	p := &PrivateRegistry{Registry: NewRegistry(t, true), User: user, Password: password}
	p.store = newBlobStore(t, p.URL, basicAuth(user, password), &p.storeRequests, &p.storeAuth)
	return p
}

// Lock makes the registry require the credentials and redirect blob reads
// to its blob store.
func (p *PrivateRegistry) Lock() {
	p.Gate(func(w http.ResponseWriter, req *http.Request) bool {
		user, password, ok := req.BasicAuth()
		if !ok || user != p.User || password != p.Password {
			w.Header().Set("WWW-Authenticate", `Basic realm="cosigntest"`)
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

func basicAuth(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// StoreRequests is how many requests the blob store served.
func (p *PrivateRegistry) StoreRequests() int64 { return p.storeRequests.Load() }

// StoreAuthorized is how many of them carried an Authorization header.
func (p *PrivateRegistry) StoreAuthorized() int64 { return p.storeAuth.Load() }

// StoreHost is the blob store's host:port.
func (p *PrivateRegistry) StoreHost() string { return strings.TrimPrefix(p.store.URL, "http://") }

// DockerConfig writes a docker config.json giving user and password for
// each of hosts in its "auths" (base64 "auth" entries) and returns its path.
func DockerConfig(t testing.TB, user, password string, hosts ...string) string {
	t.Helper()
	auths := map[string]map[string]string{}
	for _, h := range hosts {
		auths[h] = map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))}
	}
	raw, err := json.Marshal(map[string]any{"auths": auths})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
