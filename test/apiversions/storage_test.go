//go:build cluster

package apiversions

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestStorageVersionMove walks the plan of docs/api-versions.md on a real
// API server, from the CRDs deploy/crds ships to a cluster that no longer
// serves v1alpha1:
//
//  1. objects created in v1alpha1 by the shipped CRDs, stored in v1alpha1;
//  2. the CRDs serve v1beta1 beside v1alpha1 (the shipped schema under the
//     next name, conversion None), storage still v1alpha1: every object reads
//     the same in both, objects written in v1beta1 read in v1alpha1, a change
//     made in one version reads in the other;
//  3. the storage version moves to v1beta1: status.storedVersions lists both,
//     etcd still holds the old objects in v1alpha1, and the API server
//     refuses to drop v1alpha1 from the CRD;
//  4. a storage migration rewrites every object (read, write back), etcd holds
//     them all in v1beta1, and status.storedVersions is trimmed to v1beta1;
//     every object still reads the same in both versions; going back one
//     release (storage v1alpha1 again) and forward again keeps them so;
//  5. v1alpha1 stops being served, then leaves the CRD: every object still
//     reads in v1beta1.
func TestStorageVersionMove(t *testing.T) {
	ctx := t.Context()
	e := start(t)
	want := wantContent{}
	count := func(plural string) int { return len(want[plural]) }

	// 1. An install of today.
	for _, p := range samplePlugins() {
		if _, err := e.createWithStatus(ctx, "plugins", asVersion(t, p, current, "Plugin")); err != nil {
			t.Fatalf("create Plugin %s in %s: %v", p.Name, current, err)
		}
		want.record(t, "plugins", p)
	}
	for _, g := range sampleGrants() {
		if _, err := e.createWithStatus(ctx, "plugingrants", asVersion(t, g, current, "PluginGrant")); err != nil {
			t.Fatalf("create PluginGrant %s in %s: %v", g.Name, current, err)
		}
		want.record(t, "plugingrants", g)
	}
	e.requireReadable(t, want, current)
	for _, k := range kinds {
		e.requireStoredIn(t, k.plural, current, count(k.plural))
	}

	// 2. The next version served beside it; storage unchanged.
	for _, k := range kinds {
		shipped := shippedCRD(t, k.file).Spec.Versions[0]
		if err := e.updateCRD(ctx, k.plural, func(crd *apiextensionsv1.CustomResourceDefinition) {
			crd.Spec.Versions = withNextVersion(shipped, current)
			crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
		}); err != nil {
			t.Fatalf("serving %s beside %s for %s: %v", next, current, k.plural, err)
		}
	}
	e.waitServed(t, next)
	e.requireReadable(t, want, current, next)

	// Written in the next version, read in the current one (the operator,
	// the core and the CLI of the installed release read only v1alpha1).
	flex := testutil.MakePlugin("flex", testutil.Image("ibkr-flex")).Egress("ndcdyn.interactivebrokers.com").Obj()
	if _, err := e.createWithStatus(ctx, "plugins", asVersion(t, flex, next, "Plugin")); err != nil {
		t.Fatalf("create Plugin flex in %s: %v", next, err)
	}
	want.record(t, "plugins", flex)
	flexGrant := testutil.GrantFor(flex).Obj()
	if _, err := e.createWithStatus(ctx, "plugingrants", asVersion(t, flexGrant, next, "PluginGrant")); err != nil {
		t.Fatalf("create PluginGrant flex in %s: %v", next, err)
	}
	want.record(t, "plugingrants", flexGrant)
	// A change made in the next version to an object written in the
	// current one: an owner approving a host with a newer CLI.
	patch := []byte(`{"spec":{"egress":["api.nbp.pl","api.frankfurter.app"]}}`)
	if _, err := e.dyn.Resource(gvr(next, "plugingrants")).Namespace(plugins.Namespace).Patch(ctx, "fx", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch PluginGrant fx in %s: %v", next, err)
	}
	fxGrant := typedGrant(t, e.get(t, current, "plugingrants", "fx"))
	if got := fmt.Sprint(fxGrant.Spec.Egress); got != "[api.nbp.pl api.frankfurter.app]" {
		t.Fatalf("PluginGrant fx patched in %s reads egress %s in %s", next, got, current)
	}
	want.record(t, "plugingrants", fxGrant)
	e.requireReadable(t, want, current, next)
	// Storage is still the current version, whichever version wrote.
	for _, k := range kinds {
		e.requireStoredIn(t, k.plural, current, count(k.plural))
	}

	// 3. The storage version moves.
	e.moveStorage(t, next, []string{current, next})
	// Moving the storage rewrote nothing.
	for _, k := range kinds {
		e.requireStoredIn(t, k.plural, current, count(k.plural))
	}
	// The API server refuses a CRD without a version objects are stored in.
	for _, k := range kinds {
		shipped := shippedCRD(t, k.file).Spec.Versions[0]
		err := e.updateCRD(ctx, k.plural, func(crd *apiextensionsv1.CustomResourceDefinition) {
			crd.Spec.Versions = withNextVersion(shipped, next)[1:]
		})
		if err == nil || !strings.Contains(err.Error(), "storedVersions") {
			t.Fatalf("%s: dropping %s while status.storedVersions lists it: %v, want a refusal naming status.storedVersions", k.plural, current, err)
		}
	}
	e.requireReadable(t, want, current, next)

	// 4. The storage migration, then the trim.
	e.migrateAll(t, want, map[string]int{"plugins": count("plugins"), "plugingrants": count("plugingrants")})
	e.requireReadable(t, want, current, next)

	// Back one release (its CRDs serve both and store v1alpha1): what it
	// writes is stored in v1alpha1 beside the migrated objects, and both
	// read; forward again, the migration moves them all once more.
	e.moveStorage(t, current, []string{next, current})
	late := testutil.MakeGrant("late").Capabilities(connector).Obj()
	if _, err := e.createWithStatus(ctx, "plugingrants", asVersion(t, late, current, "PluginGrant")); err != nil {
		t.Fatalf("create PluginGrant late in %s after going back: %v", current, err)
	}
	want.record(t, "plugingrants", late)
	if got := e.storedVersions(t, "plugingrants"); got["late"] != group+"/"+current || got["fx"] != group+"/"+next {
		t.Fatalf("after going back, PluginGrants stored as %v, want late in %s and the migrated ones in %s", got, current, next)
	}
	e.requireReadable(t, want, current, next)
	e.moveStorage(t, next, []string{next, current})
	e.migrateAll(t, want, map[string]int{"plugingrants": 1})
	e.requireReadable(t, want, current, next)

	// 5. v1alpha1 retired: no longer served, then gone from the CRDs.
	for _, k := range kinds {
		shipped := shippedCRD(t, k.file).Spec.Versions[0]
		if err := e.updateCRD(ctx, k.plural, func(crd *apiextensionsv1.CustomResourceDefinition) {
			crd.Spec.Versions = withNextVersion(shipped, next)
			crd.Spec.Versions[0].Served = false
		}); err != nil {
			t.Fatalf("%s: no longer serving %s: %v", k.plural, current, err)
		}
	}
	e.waitNotServed(t, current)
	e.requireReadable(t, want, next)
	for _, k := range kinds {
		shipped := shippedCRD(t, k.file).Spec.Versions[0]
		if err := e.updateCRD(ctx, k.plural, func(crd *apiextensionsv1.CustomResourceDefinition) {
			crd.Spec.Versions = withNextVersion(shipped, next)[1:]
		}); err != nil {
			t.Fatalf("%s: dropping %s once nothing is stored in it: %v", k.plural, current, err)
		}
		if got := e.crd(t, k.plural).Status.StoredVersions; !slices.Equal(got, []string{next}) {
			t.Fatalf("%s: status.storedVersions %v, want [%s]", k.plural, got, next)
		}
		e.requireStoredIn(t, k.plural, next, count(k.plural))
	}
	e.requireReadable(t, want, next)
	t.Logf("%d Plugins and %d PluginGrants moved from %s to %s storage; %s retired", count("plugins"), count("plugingrants"), current, next, current)
}

// moveStorage makes both CRDs serve both versions and store to, checks
// the status.storedVersions the API server then reports, and waits, as a
// storage migrator does, until discovery reports the new storage version
// hash: from then on the API server writes to.
func (e *env) moveStorage(t *testing.T, to string, storedVersions []string) {
	t.Helper()
	before, err := e.storageHashes(next)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		shipped := shippedCRD(t, k.file).Spec.Versions[0]
		if err := e.updateCRD(t.Context(), k.plural, func(crd *apiextensionsv1.CustomResourceDefinition) {
			crd.Spec.Versions = withNextVersion(shipped, to)
		}); err != nil {
			t.Fatalf("moving the storage of %s to %s: %v", k.plural, to, err)
		}
		if got := e.crd(t, k.plural).Status.StoredVersions; !slices.Equal(got, storedVersions) {
			t.Fatalf("%s: status.storedVersions %v after the move to %s, want %v", k.plural, got, to, storedVersions)
		}
	}
	testutil.Eventually(t, 30*time.Second, "discovery to report the storage version "+to, func() (bool, string) {
		now, err := e.storageHashes(next)
		if err != nil {
			return false, err.Error()
		}
		for _, k := range kinds {
			if now[k.plural] == before[k.plural] {
				return false, fmt.Sprintf("%s still %s", k.plural, now[k.plural])
			}
		}
		return true, ""
	})
}

// migrateAll runs the storage migration on both resources, checks that it
// rewrote as many objects as rewritten says (by plural; the others were
// stored in the next version already) and, in etcd, that every object is
// now stored in the next version, then trims status.storedVersions.
func (e *env) migrateAll(t *testing.T, want wantContent, rewritten map[string]int) {
	t.Helper()
	for _, k := range kinds {
		got, err := migrateStorage(t.Context(), e.dyn, gvr(next, k.plural))
		if err != nil {
			t.Fatalf("migrating %s: %v", k.plural, err)
		}
		n, r := len(want[k.plural]), rewritten[k.plural]
		if got != (migrated{Rewritten: r, Unchanged: n - r}) {
			t.Fatalf("migrating %s: %+v, want %d rewritten and %d unchanged", k.plural, got, r, n-r)
		}
		e.requireStoredIn(t, k.plural, next, len(want[k.plural]))
		if err := e.trimStoredVersions(t, k.plural, next); err != nil {
			t.Fatal(err)
		}
	}
}

// trimStoredVersions sets the CRD's status.storedVersions to only version,
// through the CRD's status subresource, once a migration has rewritten
// every object in it: the last step of a migration, which lets a later CRD
// drop the older versions.
func (e *env) trimStoredVersions(t *testing.T, plural, version string) error {
	t.Helper()
	crd := e.crd(t, plural)
	crd.Status.StoredVersions = []string{version}
	if err := e.crds.Status().Update(t.Context(), crd); err != nil {
		return fmt.Errorf("%s: trimming status.storedVersions to [%s]: %w", plural, version, err)
	}
	if got := e.crd(t, plural).Status.StoredVersions; !slices.Equal(got, []string{version}) {
		return fmt.Errorf("%s: status.storedVersions %v after the trim, want [%s]", plural, got, version)
	}
	return nil
}
