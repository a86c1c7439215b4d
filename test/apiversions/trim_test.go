//go:build cluster

package apiversions

import (
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestTrimBeforeMigration shows why only a storage migration that
// rewrote every object may trim status.storedVersions: the API server
// takes the trim on trust, then lets v1alpha1 leave the CRD, and every
// Plugin still stored in it becomes unreadable (a get fails, and so does a
// list of all of them). Putting v1alpha1 back in the CRD, not served,
// makes them readable again, and a migration then finishes the move.
func TestTrimBeforeMigration(t *testing.T) {
	ctx := t.Context()
	e := start(t)
	const plural = "plugins"
	want := wantContent{}
	for _, p := range samplePlugins() {
		if _, err := e.createWithStatus(ctx, plural, asVersion(t, p, current, "Plugin")); err != nil {
			t.Fatal(err)
		}
		want.record(t, plural, p)
	}

	shipped := shippedCRD(t, "openfief.io_plugins.yaml").Spec.Versions[0]
	setVersions := func(versions []apiextensionsv1.CustomResourceDefinitionVersion) {
		t.Helper()
		if err := e.updateCRD(ctx, plural, func(crd *apiextensionsv1.CustomResourceDefinition) { crd.Spec.Versions = versions }); err != nil {
			t.Fatal(err)
		}
	}
	setVersions(withNextVersion(shipped, next))
	e.waitServed(t, next, plural)
	// The mistake: trimmed with nothing migrated; the API server agrees,
	// and then agrees to drop v1alpha1.
	if err := e.trimStoredVersions(t, plural, next); err != nil {
		t.Fatal(err)
	}
	setVersions(withNextVersion(shipped, next)[1:])
	e.requireStoredIn(t, plural, current, len(want[plural]))
	testutil.Eventually(t, 30*time.Second, "the Plugins stored in v1alpha1 to become unreadable", func() (bool, string) {
		_, err := e.dyn.Resource(gvr(next, plural)).Namespace(plugins.Namespace).Get(ctx, "fx", metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), current), "get: " + errString(err)
	})
	if _, err := e.dyn.Resource(gvr(next, plural)).Namespace(plugins.Namespace).List(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("a list of Plugins answered while every Plugin is stored in a version the CRD no longer has")
	}

	// The way back: v1alpha1 in the CRD again, not served; then the
	// migration the trim should have waited for.
	back := withNextVersion(shipped, next)
	back[0].Served = false
	setVersions(back)
	testutil.Eventually(t, 30*time.Second, "the Plugins to read again", func() (bool, string) {
		_, err := e.dyn.Resource(gvr(next, plural)).Namespace(plugins.Namespace).List(ctx, metav1.ListOptions{})
		return err == nil, "list: " + errString(err)
	})
	got, err := migrateStorage(ctx, e.dyn, gvr(next, plural))
	if err != nil || got != (migrated{Rewritten: len(want[plural])}) {
		t.Fatalf("migrating: %+v, %v", got, err)
	}
	e.requireStoredIn(t, plural, next, len(want[plural]))
	setVersions(withNextVersion(shipped, next)[1:])
	e.requireReadable(t, want, next)
}

// errString is err's text, or "nil".
func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
