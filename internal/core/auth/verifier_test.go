//go:build cluster

package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// These tests run against a real etcd and kube-apiserver (devcluster's
// minimal mode), with tokens minted by TokenRequest. Without the binaries
// from `make controlplane` they fail, saying so; they never skip.
func TestMain(m *testing.M) { os.Exit(devcluster.Main(m)) }

func cluster(t testing.TB) (*kubernetes.Clientset, *rest.Config) {
	t.Helper()
	c := devcluster.Shared(t, devcluster.Options{Mode: devcluster.Minimal})
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	testutil.EnsureNamespaces(t, cs, plugins.Namespace, "other")
	return cs, c.Config
}

// token mints a TokenRequest token of ServiceAccount ns/name for audience,
// creating the ServiceAccount if needed, and returns it with its expiry.
func token(t testing.TB, cs kubernetes.Interface, ns, name, audience string) (string, time.Time) {
	t.Helper()
	testutil.EnsureServiceAccount(t, cs, ns, name)
	return testutil.ServiceAccountToken(t, cs, ns, name, audience)
}

func TestVerify(t *testing.T) {
	cs, _ := cluster(t)
	v, err := NewVerifier(cs.AuthenticationV1(), Options{Serving: func(i string) bool { return i != "gone" }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	own, _ := token(t, cs, plugins.Namespace, plugins.ServiceAccountName("fx"), plugins.AudienceCore)
	got, err := v.Verify(ctx, own)
	if err != nil || got != "fx" {
		t.Fatalf("Verify(own token) = %q, %v; want fx", got, err)
	}
	if err := v.VerifyFor(ctx, own, "fx"); err != nil {
		t.Fatalf("VerifyFor(own token, fx): %v", err)
	}

	other, _ := token(t, cs, plugins.Namespace, plugins.ServiceAccountName("ibkr"), plugins.AudienceCore)
	egressTok, _ := token(t, cs, plugins.Namespace, plugins.ServiceAccountName("fx"), plugins.AudienceEgress)
	pluginAud, _ := token(t, cs, plugins.Namespace, plugins.ServiceAccountName("fx"), "openfief-plugin:fx")
	outside, _ := token(t, cs, "other", plugins.ServiceAccountName("fx"), plugins.AudienceCore)
	coreSA, _ := token(t, cs, plugins.Namespace, "openfief-core", plugins.AudienceCore)
	gone, _ := token(t, cs, plugins.Namespace, plugins.ServiceAccountName("gone"), plugins.AudienceCore)

	for what, tc := range map[string]struct {
		token, instance string
	}{
		"another instance's token":          {other, "fx"},
		"the egress audience":               {egressTok, "fx"},
		"a plugin audience":                 {pluginAud, "fx"},
		"a plugin-x ServiceAccount outside": {outside, "fx"},
		"the core's own ServiceAccount":     {coreSA, "fx"},
		"an instance no longer served":      {gone, "gone"},
		"garbage":                           {"not-a-token", "fx"},
		"empty":                             {"", "fx"},
	} {
		err := v.VerifyFor(ctx, tc.token, tc.instance)
		if !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want ErrRefused", what, err)
			continue
		}
		if tc.token != "" && strings.Contains(err.Error(), tc.token) {
			t.Errorf("%s: the error holds the token", what)
		}
	}
}

// TestExpiredToken: a token accepted (and cached) while valid is refused
// once the core's clock passes its exp.
func TestExpiredToken(t *testing.T) {
	cs, _ := cluster(t)
	var now atomic.Pointer[time.Time]
	start := time.Now()
	now.Store(&start)
	v, err := NewVerifier(cs.AuthenticationV1(), Options{Now: func() time.Time { return *now.Load() }})
	if err != nil {
		t.Fatal(err)
	}
	tok, exp := token(t, cs, plugins.Namespace, plugins.ServiceAccountName("expiring"), plugins.AudienceCore)
	if _, err := v.Verify(t.Context(), tok); err != nil {
		t.Fatalf("valid token: %v", err)
	}
	later := exp.Add(time.Second)
	now.Store(&later)
	if _, err := v.Verify(t.Context(), tok); !errors.Is(err, ErrRefused) {
		t.Fatalf("expired token: %v, want ErrRefused", err)
	}
}

// TestRevokedServiceAccount: once the ServiceAccount is deleted the API
// server refuses its tokens; the cache reuses an accepted review for at most
// CacheTTL, after which the token is refused too.
func TestRevokedServiceAccount(t *testing.T) {
	cs, _ := cluster(t)
	var now atomic.Pointer[time.Time]
	start := time.Now()
	now.Store(&start)
	cached, err := NewVerifier(cs.AuthenticationV1(), Options{Now: func() time.Time { return *now.Load() }})
	if err != nil {
		t.Fatal(err)
	}
	uncached, err := NewVerifier(cs.AuthenticationV1(), Options{CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	sa := plugins.ServiceAccountName("revoked")
	tok, _ := token(t, cs, plugins.Namespace, sa, plugins.AudienceCore)
	for name, v := range map[string]*Verifier{"cached": cached, "uncached": uncached} {
		if _, err := v.Verify(t.Context(), tok); err != nil {
			t.Fatalf("%s, before the deletion: %v", name, err)
		}
	}
	if err := cs.CoreV1().ServiceAccounts(plugins.Namespace).Delete(t.Context(), sa, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server sees the deletion through its informer, a moment later.
	testutil.Eventually(t, 10*time.Second, "the deleted ServiceAccount's token refused", func() (bool, string) {
		_, err := uncached.Verify(t.Context(), tok)
		return errors.Is(err, ErrRefused), fmt.Sprint(err)
	})
	later := start.Add(DefaultCacheTTL + time.Second)
	now.Store(&later)
	if _, err := cached.Verify(t.Context(), tok); !errors.Is(err, ErrRefused) {
		t.Fatalf("cached, a TTL after the deletion: %v, want ErrRefused", err)
	}
}

// TestRequirePlugin serves a handler behind RequirePlugin on real TCP.
func TestRequirePlugin(t *testing.T) {
	cs, _ := cluster(t)
	v, err := NewVerifier(cs.AuthenticationV1(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(RequirePlugin(v, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		instance, _ := Instance(r.Context())
		fmt.Fprint(w, instance)
	})))
	defer srv.Close()
	own, _ := token(t, cs, plugins.Namespace, plugins.ServiceAccountName("mw"), plugins.AudienceCore)
	egressTok, _ := token(t, cs, plugins.Namespace, plugins.ServiceAccountName("mw"), plugins.AudienceEgress)
	for what, tc := range map[string]struct {
		header string
		status int
		body   string
	}{
		"own token":    {"Bearer " + own, http.StatusOK, "mw"},
		"no header":    {"", http.StatusUnauthorized, ""},
		"basic scheme": {"Basic " + own, http.StatusUnauthorized, ""},
		"egress token": {"Bearer " + egressTok, http.StatusUnauthorized, ""},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
		if tc.header != "" {
			req.Header.Set("Authorization", tc.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || (tc.body != "" && string(body) != tc.body) {
			t.Errorf("%s: %d %q, want %d %q", what, resp.StatusCode, body, tc.status, tc.body)
		}
		if strings.Contains(string(body), own) || strings.Contains(string(body), egressTok) {
			t.Errorf("%s: the answer holds a token", what)
		}
	}
}

// BenchmarkVerify compares a verification answered from the cache with one
// that asks the API server each time (the core's real TokenReview path).
func BenchmarkVerify(b *testing.B) {
	cs, _ := cluster(b)
	tok, _ := token(b, cs, plugins.Namespace, plugins.ServiceAccountName("bench"), plugins.AudienceCore)
	for name, ttl := range map[string]time.Duration{"cached": 0, "uncached": -1} {
		b.Run(name, func(b *testing.B) {
			v, err := NewVerifier(cs.AuthenticationV1(), Options{CacheTTL: ttl})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for b.Loop() {
				if _, err := v.Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
