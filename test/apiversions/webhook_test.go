//go:build cluster

package apiversions

import (
	"crypto/tls"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestWebhookConversion moves PluginGrant to a version whose
// spec.imagePullSecrets has another shape, the kind of change that needs a
// conversion webhook (docs/api-versions.md): the test serves the webhook on
// loopback with a CA of its own in the CRD's caBundle. Grants written in
// either version read in the other, the storage moves and a migration
// rewrites every grant in the new shape, status.storedVersions is trimmed;
// then, with the webhook stopped, the storage version still reads and
// writes, and a get or a write in the other version fails: the webhook must
// run for as long as a version other than the storage one is served.
func TestWebhookConversion(t *testing.T) {
	ctx := t.Context()
	e := start(t)
	const plural = "plugingrants"

	grants := sampleGrants()
	for _, g := range grants {
		if _, err := e.createWithStatus(ctx, plural, asVersion(t, g, current, "PluginGrant")); err != nil {
			t.Fatalf("create PluginGrant %s in %s: %v", g.Name, current, err)
		}
	}

	caPEM, serving := loopbackCA(t)
	conv := &converter{}
	srv := httptest.NewUnstartedServer(conv)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serving}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	shipped := shippedCRD(t, "openfief.io_plugingrants.yaml").Spec.Versions[0]
	next, err := reshapedGrantVersion(shipped)
	if err != nil {
		t.Fatal(err)
	}
	versions := func(storage string) []apiextensionsv1.CustomResourceDefinitionVersion {
		cur, nxt := *shipped.DeepCopy(), *next.DeepCopy()
		cur.Storage, nxt.Storage = storage == current, storage == reshaped
		return []apiextensionsv1.CustomResourceDefinitionVersion{cur, nxt}
	}
	if err := e.updateCRD(ctx, plural, func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Spec.Versions = versions(current)
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig: &apiextensionsv1.WebhookClientConfig{
					URL:      ptr.To(srv.URL + "/convert"),
					CABundle: caPEM,
				},
				ConversionReviewVersions: []string{"v1"},
			},
		}
	}); err != nil {
		t.Fatalf("serving %s beside %s through the webhook: %v", reshaped, current, err)
	}
	e.waitServed(t, reshaped, plural)

	// The grants of today read in the new shape, through the webhook.
	requireBoth := func(names ...string) {
		t.Helper()
		olds, news := e.list(t, current, plural), e.list(t, reshaped, plural)
		if len(olds) != len(names) || len(news) != len(names) {
			t.Fatalf("%d grants in %s and %d in %s, want %d", len(olds), current, len(news), reshaped, len(names))
		}
		for _, name := range names {
			old, nw := olds[name], news[name]
			if old == nil || nw == nil {
				t.Fatalf("PluginGrant %s missing in %s or %s", name, current, reshaped)
			}
			typedGrant(t, old)
			back, err := convertGrant(mustJSON(t, nw), group+"/"+current)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(back); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(old.Object, u.Object); d != "" {
				t.Errorf("PluginGrant %s: read in %s, converted back, differs from the read in %s (-%s +back):\n%s", name, reshaped, current, current, d)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	requireBoth("fx", "records")
	if got := pullSecrets(t, e.get(t, reshaped, plural, "records")); got != "[map[name:registry-login]]" {
		t.Fatalf("PluginGrant records in %s: imagePullSecrets %s, want [map[name:registry-login]]", reshaped, got)
	}
	if conv.calls.Load() == 0 {
		t.Fatal("the API server served the reshaped version without calling the webhook")
	}

	// Written in the new shape, read in the old.
	flex := testutil.MakeGrant("flex").Capabilities(connector).Egress("ndcdyn.interactivebrokers.com").PullSecrets("a", "b").Obj()
	u := asVersion(t, flex, reshaped, "PluginGrant")
	if err := unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}, "spec", "imagePullSecrets"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.createWithStatus(ctx, plural, u); err != nil {
		t.Fatalf("create PluginGrant flex in %s: %v", reshaped, err)
	}
	if got := typedGrant(t, e.get(t, current, plural, "flex")).Spec.ImagePullSecrets; !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("PluginGrant flex written in %s reads imagePullSecrets %v in %s, want [a b]", reshaped, got, current)
	}
	requireBoth("fx", "records", "flex")
	e.requireStoredIn(t, plural, current, 3)

	// The storage moves; the migration rewrites every grant in the new shape.
	before, err := e.storageHashes(reshaped)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.updateCRD(ctx, plural, func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Spec.Versions = versions(reshaped)
	}); err != nil {
		t.Fatalf("moving the storage to %s: %v", reshaped, err)
	}
	testutil.Eventually(t, 30*time.Second, "discovery to report the new storage version", func() (bool, string) {
		now, err := e.storageHashes(reshaped)
		if err != nil {
			return false, err.Error()
		}
		return now[plural] != before[plural], fmt.Sprintf("still %s", now[plural])
	})
	got, err := migrateStorage(ctx, e.dyn, gvr(reshaped, plural))
	if err != nil {
		t.Fatalf("migrating %s: %v", plural, err)
	}
	if got != (migrated{Rewritten: 3}) {
		t.Fatalf("migrating %s: %+v, want 3 rewritten", plural, got)
	}
	e.requireStoredIn(t, plural, reshaped, 3)
	stored := e.storedObjects(t, plural)["records"]
	if ips, _, _ := unstructured.NestedSlice(stored, "spec", "imagePullSecrets"); fmt.Sprint(ips) != "[map[name:registry-login]]" {
		t.Fatalf("PluginGrant records stored with imagePullSecrets %v, want [map[name:registry-login]]", ips)
	}
	if err := e.trimStoredVersions(t, plural, reshaped); err != nil {
		t.Fatal(err)
	}
	requireBoth("fx", "records", "flex")

	// Without the webhook, only the storage version reads.
	srv.Close()
	if _, err := e.dyn.Resource(gvr(reshaped, plural)).Namespace(plugins.Namespace).Get(ctx, "records", metav1.GetOptions{}); err != nil {
		t.Fatalf("get in the storage version %s with the webhook down: %v", reshaped, err)
	}
	early := asVersion(t, testutil.MakeGrant("early").Capabilities(connector).Obj(), reshaped, "PluginGrant")
	if _, err := e.dyn.Resource(gvr(reshaped, plural)).Namespace(plugins.Namespace).Create(ctx, early, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create in the storage version %s with the webhook down: %v", reshaped, err)
	}
	// A read from etcd (a get) and any write in the other version need the
	// webhook, and fail without it. (A list may still answer from the API
	// server's cache of that version, converted while the webhook ran.)
	_, err = e.dyn.Resource(gvr(current, plural)).Namespace(plugins.Namespace).Get(ctx, "records", metav1.GetOptions{})
	if err == nil || !strings.Contains(err.Error(), "conversion webhook") {
		t.Fatalf("get in %s with the webhook down: %v, want a failed conversion", current, err)
	}
	late := asVersion(t, testutil.MakeGrant("late").Capabilities(connector).Obj(), current, "PluginGrant")
	if _, cerr := e.dyn.Resource(gvr(current, plural)).Namespace(plugins.Namespace).Create(ctx, late, metav1.CreateOptions{}); cerr == nil || !strings.Contains(cerr.Error(), "conversion webhook") {
		t.Fatalf("create in %s with the webhook down: %v, want a failed conversion", current, cerr)
	}
	t.Logf("3 PluginGrants moved from %s to %s storage through a conversion webhook (%d reviews); with the webhook down, a get in %s fails: %v", current, reshaped, conv.calls.Load(), current, err)
}

// pullSecrets is an unstructured grant's spec.imagePullSecrets, printed.
func pullSecrets(t *testing.T, u *unstructured.Unstructured) string {
	t.Helper()
	ips, _, err := unstructured.NestedSlice(u.Object, "spec", "imagePullSecrets")
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(ips)
}

// mustJSON is u as JSON.
func mustJSON(t *testing.T, u *unstructured.Unstructured) []byte {
	t.Helper()
	b, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
