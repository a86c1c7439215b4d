//go:build cluster

package kube

import (
	"context"
	"errors"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/egress"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// These tests run against a real etcd and kube-apiserver (devcluster's
// minimal mode). Without the binaries from `make controlplane` they fail,
// saying so; they never skip.
func TestMain(m *testing.M) { os.Exit(devcluster.Main(m)) }

// cluster returns an admin clientset and config of the package's control
// plane, with the openfief namespace in place.
func cluster(t *testing.T) (*kubernetes.Clientset, *rest.Config) {
	t.Helper()
	c := devcluster.Shared(t, devcluster.Options{Mode: devcluster.Minimal})
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	testutil.EnsureNamespaces(t, cs, plugins.Namespace, "other")
	return cs, c.Config
}

// requestToken returns a TokenRequest token of ServiceAccount ns/name for
// audience, creating the ServiceAccount if needed.
func requestToken(t *testing.T, cs kubernetes.Interface, ns, name, audience string) string {
	t.Helper()
	testutil.EnsureServiceAccount(t, cs, ns, name)
	tok, _ := testutil.ServiceAccountToken(t, cs, ns, name, audience)
	return tok
}

func TestTokenReviewer(t *testing.T) {
	cs, _ := cluster(t)
	r, err := NewTokenReviewer(cs.AuthenticationV1(), plugins.AudienceEgress)
	if err != nil {
		t.Fatal(err)
	}
	egressToken := requestToken(t, cs, plugins.Namespace, plugins.ServiceAccountName("x"), plugins.AudienceEgress)
	got, err := r.Review(t.Context(), egressToken)
	if err != nil {
		t.Fatalf("egress token refused: %v", err)
	}
	if want := "system:serviceaccount:openfief:plugin-x"; got != want {
		t.Fatalf("username %q, want %q", got, want)
	}
	if p, ok := plugins.PluginForServiceAccount(got); !ok || p != "x" {
		t.Fatalf("PluginForServiceAccount(%q) = %q, %v", got, p, ok)
	}

	core := requestToken(t, cs, plugins.Namespace, plugins.ServiceAccountName("x"), plugins.AudienceCore)
	for what, tok := range map[string]string{"openfief-core token": core, "garbage": "not-a-token"} {
		_, err := r.Review(t.Context(), tok)
		if !errors.Is(err, egress.ErrUnauthenticated) {
			t.Fatalf("%s: %v, want ErrUnauthenticated", what, err)
		}
		if strings.Contains(err.Error(), tok) {
			t.Fatalf("%s: the error holds the token", what)
		}
	}

	// A valid egress token of a ServiceAccount outside openfief is
	// authenticated, but its username is no plugin's.
	other := requestToken(t, cs, "other", plugins.ServiceAccountName("x"), plugins.AudienceEgress)
	got, err = r.Review(t.Context(), other)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := plugins.PluginForServiceAccount(got); ok {
		t.Fatalf("%q taken for a plugin", got)
	}
}

// TestCachedReviewMakesNoAPICall counts TokenReview requests on the wire.
func TestCachedReviewMakesNoAPICall(t *testing.T) {
	cs, cfg := cluster(t)
	var posts atomic.Int64
	counted := rest.CopyConfig(cfg)
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/tokenreviews") {
				posts.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	ccs, err := kubernetes.NewForConfig(counted)
	if err != nil {
		t.Fatal(err)
	}
	inner, _ := NewTokenReviewer(ccs.AuthenticationV1(), plugins.AudienceEgress)
	r := egress.NewCachingTokenReviewer(inner)
	token := requestToken(t, cs, plugins.Namespace, plugins.ServiceAccountName("cached"), plugins.AudienceEgress)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if _, err := r.Review(context.Background(), token); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for range 10 {
		if _, err := r.Review(t.Context(), token); err != nil {
			t.Fatal(err)
		}
	}
	if n := posts.Load(); n != 1 {
		t.Fatalf("%d TokenReview calls, want 1", n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestWatchAllowLists(t *testing.T) {
	cs, _ := cluster(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const name = "allowlist-under-test"
	cms := cs.CoreV1().ConfigMaps(plugins.Namespace)
	// A ConfigMap of another name must not count.
	if _, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "unrelated"},
		Data:       map[string]string{"x": "api.bank.example:443\n"},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	a := WatchAllowLists(ctx, cs, plugins.Namespace, name, nil)
	var mu sync.Mutex
	var seen []plugins.AllowLists
	unsubscribe := a.Subscribe(func(l plugins.AllowLists) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, l)
	})
	defer unsubscribe()

	expect := func(what string, ready bool, reason string, want plugins.AllowLists) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			r, why := a.Ready()
			got := a.AllowLists()
			if r == ready && strings.Contains(why, reason) && equalLists(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: Ready() = %v %q, lists %v; want %v %q, %v", what, r, why, got, ready, reason, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	expect("missing", false, "not found", nil)

	cm, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Data: map[string]string{
			"x": "api.bank.example:443\nfiles.bank.example:443\n",
			"y": "",
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expect("created", true, "", plugins.AllowLists{
		"x": {"api.bank.example:443", "files.bank.example:443"},
		"y": {},
	})

	cm.Data = map[string]string{"x": "files.bank.example:443\n"}
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("host and plugin removed", true, "", plugins.AllowLists{"x": {"files.bank.example:443"}})

	cm.Data = map[string]string{"x": "files.bank.example:443\n", "y": "API.example.com\n"}
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("garbled", false, "does not decode", nil)

	cm.Data = map[string]string{"x": "files.bank.example:443\n"}
	if _, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("mended", true, "", plugins.AllowLists{"x": {"files.bank.example:443"}})

	if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("deleted", false, "not found", nil)

	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 5 {
		t.Errorf("subscriber saw %d swaps, want at least 5", len(seen))
	}
}

func equalLists(a, b plugins.AllowLists) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !slices.Equal(v, w) {
			return false
		}
	}
	return true
}
