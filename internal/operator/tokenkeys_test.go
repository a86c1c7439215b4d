//go:build cluster

package operator

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// stubDiscovery is the API server's real discovery, which a test can make
// fail or answer other keys, counting the calls.
type stubDiscovery struct {
	real  IssuerDiscovery
	calls atomic.Int64

	mu   sync.Mutex
	err  error
	jwks []byte
}

func (s *stubDiscovery) Discover(ctx context.Context) (string, []byte, error) {
	defer s.calls.Add(1)
	s.mu.Lock()
	err, jwks := s.err, s.jwks
	s.mu.Unlock()
	if err != nil {
		return "", nil, err
	}
	issuer, keys, err := s.real.Discover(ctx)
	if jwks != nil {
		keys = jwks
	}
	return issuer, keys, err
}

func (s *stubDiscovery) set(err error, jwks []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err, s.jwks = err, jwks
}

// startTokenKeys runs a TokenKeysPublisher in a manager of its own until
// the test ends, counting the manager's writes.
func startTokenKeys(t *testing.T, c *devcluster.Cluster, refresh time.Duration) (*stubDiscovery, *operatorRun) {
	t.Helper()
	discovery, err := NewAPIServerDiscovery(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	stub := &stubDiscovery{real: discovery}
	run := startManager(t, c, 0, func(mgr ctrl.Manager) error {
		return (&TokenKeysPublisher{Client: mgr.GetClient(), Discovery: stub, Refresh: refresh}).SetupWithManager(mgr)
	})
	return stub, run
}

// apiServerKeys reads the issuer and the published form of the keys straight
// from the API server's discovery endpoints, with a plain HTTP client.
func apiServerKeys(t *testing.T, cfg *rest.Config) (issuer, jwks string) {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) []byte {
		resp, err := hc.Get(strings.TrimSuffix(cfg.Host, "/") + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		return body
	}
	var conf struct {
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal(get("/.well-known/openid-configuration"), &conf); err != nil {
		t.Fatal(err)
	}
	keys, err := plugins.ParseTokenKeys(get("/openid/v1/jwks"))
	if err != nil {
		t.Fatal(err)
	}
	return conf.Issuer, string(keys.JWKS())
}

// publishedKeys waits until openfief-sa-jwks holds exactly issuer and jwks
// and returns it.
func publishedKeys(t *testing.T, cl client.Client, issuer, jwks string) *corev1.ConfigMap {
	t.Helper()
	var cm corev1.ConfigMap
	testutil.Eventually(t, waitTimeout, "openfief-sa-jwks to hold the API server's keys", func() (bool, string) {
		if err := cl.Get(context.Background(), tokenKeysKey, &cm); err != nil {
			return false, err.Error()
		}
		ok := cm.Data[plugins.TokenKeysIssuerKey] == issuer && cm.Data[plugins.TokenKeysJWKSKey] == jwks
		return ok, fmt.Sprintf("%v", cm.Data)
	})
	return &cm
}

func deleteTokenKeys(t *testing.T, cl client.Client) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: tokenKeysKey.Name, Namespace: tokenKeysKey.Namespace}}
	if err := cl.Delete(context.Background(), cm); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

func TestTokenKeysPublisher(t *testing.T) {
	c, cl := testCluster(t)
	ctx := context.Background()
	deleteTokenKeys(t, cl)
	issuer, jwks := apiServerKeys(t, c.Config)
	stub, run := startTokenKeys(t, c, time.Hour)

	cm := publishedKeys(t, cl, issuer, jwks)
	owned := false
	for _, f := range cm.ManagedFields {
		if f.Manager == TokenKeysFieldManager && f.Operation == metav1.ManagedFieldsOperationApply {
			owned = true
		}
	}
	if !owned {
		t.Errorf("no server-side apply by %s in %v", TokenKeysFieldManager, cm.ManagedFields)
	}

	t.Run("no write in steady state", func(t *testing.T) {
		cm := publishedKeys(t, cl, issuer, jwks)
		writes, calls := run.writes.writes.Load(), stub.calls.Load()
		// An annotation by someone else is an event, so a pass, but no change
		// to what the publisher owns.
		cm.Annotations = map[string]string{"example.com/touched": "yes"}
		if err := cl.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, waitTimeout, "a publisher pass after the event", func() (bool, string) {
			return stub.calls.Load() > calls, fmt.Sprint(stub.calls.Load())
		})
		time.Sleep(500 * time.Millisecond)
		if got := run.writes.writes.Load(); got != writes {
			t.Errorf("the publisher wrote %d times in steady state", got-writes)
		}
		var after corev1.ConfigMap
		if err := cl.Get(ctx, tokenKeysKey, &after); err != nil {
			t.Fatal(err)
		}
		if after.ResourceVersion != cm.ResourceVersion {
			t.Errorf("resourceVersion %s after the pass, want %s", after.ResourceVersion, cm.ResourceVersion)
		}
	})

	t.Run("deleted is put back", func(t *testing.T) {
		old := publishedKeys(t, cl, issuer, jwks)
		deleteTokenKeys(t, cl)
		cm := publishedKeys(t, cl, issuer, jwks)
		if cm.UID == old.UID {
			t.Error("the ConfigMap was never deleted")
		}
	})

	t.Run("edited is reverted", func(t *testing.T) {
		for _, key := range []string{plugins.TokenKeysJWKSKey, plugins.TokenKeysIssuerKey} {
			cm := publishedKeys(t, cl, issuer, jwks)
			cm.Data[key] = `{"keys":[]}`
			if err := cl.Update(ctx, cm); err != nil {
				t.Fatal(err)
			}
			publishedKeys(t, cl, issuer, jwks)
		}
	})

	t.Run("unreadable keys leave the published ones", func(t *testing.T) {
		cm := publishedKeys(t, cl, issuer, jwks)
		for _, bad := range []struct {
			err  error
			jwks string
		}{
			{err: errors.New("discovery down (test)")},
			{jwks: `{"keys":[]}`},
			{jwks: `{"keys":[{"kty":"oct","kid":"k","k":"c2VjcmV0"}]}`},
			{jwks: `not json`},
		} {
			var raw []byte
			if bad.jwks != "" {
				raw = []byte(bad.jwks)
			}
			stub.set(bad.err, raw)
			p := &TokenKeysPublisher{Client: cl, Discovery: stub}
			if wrote, err := p.Publish(ctx); err == nil || wrote {
				t.Errorf("%v %s: Publish = %v, %v; want an error and no write", bad.err, bad.jwks, wrote, err)
			}
			// And through the running publisher: an event, a failing pass.
			calls := stub.calls.Load()
			cm.Annotations = map[string]string{"example.com/touched": bad.jwks + fmt.Sprint(bad.err)}
			if err := cl.Update(ctx, cm); err != nil {
				t.Fatal(err)
			}
			testutil.Eventually(t, waitTimeout, "a publisher pass after the event", func() (bool, string) {
				return stub.calls.Load() > calls, fmt.Sprint(stub.calls.Load())
			})
			cm = publishedKeys(t, cl, issuer, jwks)
		}
		stub.set(nil, nil)
	})
}

func TestTokenKeysPublisherRefreshes(t *testing.T) {
	c, cl := testCluster(t)
	deleteTokenKeys(t, cl)
	issuer, jwks := apiServerKeys(t, c.Config)
	stub, _ := startTokenKeys(t, c, 300*time.Millisecond)
	publishedKeys(t, cl, issuer, jwks)

	// A rotated key reaches the ConfigMap with no event on it.
	rotated := rsaJWKS(t, "rotated")
	stub.set(nil, rotated)
	keys, err := plugins.ParseTokenKeys(rotated)
	if err != nil {
		t.Fatal(err)
	}
	publishedKeys(t, cl, issuer, string(keys.JWKS()))
	stub.set(nil, nil)
	publishedKeys(t, cl, issuer, jwks)
}

// rsaJWKS is a JWKS of one fresh RSA public key.
func rsaJWKS(t *testing.T, kid string) []byte {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	doc := map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
		"n": enc.EncodeToString(k.N.Bytes()), "e": enc.EncodeToString(big.NewInt(int64(k.E)).Bytes()),
	}}}
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
