//go:build cluster

package apiversions

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// The versions the tests move between: the one shipped today and the next,
// which only these tests build.
const (
	current = "v1alpha1"
	next    = "v1beta1"
)

// group is the API group both versions belong to.
var group = v1alpha1.GroupVersion.Group

// kinds are the two resources, by plural, with their CRD file in
// deploy/crds and their kind.
var kinds = []struct {
	plural, file, kind string
}{
	{"plugins", "openfief.io_plugins.yaml", "Plugin"},
	{"plugingrants", "openfief.io_plugingrants.yaml", "PluginGrant"},
}

// env is one test's control plane and its clients.
type env struct {
	cluster *devcluster.Cluster
	// crds reads and writes CustomResourceDefinitions; typed, so an update
	// carries the CRD's resourceVersion.
	crds client.Client
	// dyn reads and writes the custom resources in whichever version a
	// call names, with no Go type for the next version.
	dyn  dynamic.Interface
	disc discovery.DiscoveryInterface
}

// start starts a control plane for one test (etcd and kube-apiserver) with
// the openfief namespace and both CRDs installed as deploy/crds ships them,
// and stops it when the test ends.
func start(t *testing.T) *env {
	t.Helper()
	c, err := devcluster.Start(t.Context(), devcluster.Options{Mode: devcluster.Minimal})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{cluster: c}
	if e.crds, err = client.New(c.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	if e.dyn, err = dynamic.NewForConfig(c.Config); err != nil {
		t.Fatal(err)
	}
	if e.disc, err = discovery.NewDiscoveryClientForConfig(c.Config); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: plugins.Namespace}}
	if err := e.crds.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		crd := shippedCRD(t, k.file)
		if err := e.crds.Create(t.Context(), crd); err != nil {
			t.Fatalf("installing %s as shipped: %v", crd.Name, err)
		}
	}
	e.waitServed(t, current)
	return e
}

// shippedCRD reads a CRD of deploy/crds as a release ships it.
func shippedCRD(t *testing.T, file string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testutil.CRDDir(), file))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != current {
		t.Fatalf("%s serves %d versions, want only %s: the test builds the next version from the one shipped", file, len(crd.Spec.Versions), current)
	}
	return crd
}

// withNextVersion returns the versions of a CRD that serves the current
// version and, beside it, the next one: a copy of the current version's
// schema, printer columns and subresources under the next name. storage
// names the version the API server stores. With the schemas identical, the
// conversion strategy None (the API server only rewrites apiVersion) is
// lossless.
func withNextVersion(shipped apiextensionsv1.CustomResourceDefinitionVersion, storage string) []apiextensionsv1.CustomResourceDefinitionVersion {
	cur := *shipped.DeepCopy()
	cur.Served, cur.Storage = true, storage == current
	nxt := *shipped.DeepCopy()
	nxt.Name, nxt.Served, nxt.Storage = next, true, storage == next
	return []apiextensionsv1.CustomResourceDefinitionVersion{cur, nxt}
}

// updateCRD changes the CRD of plural with change and writes it, retrying
// on a conflict; it returns the API server's error otherwise.
func (e *env) updateCRD(ctx context.Context, plural string, change func(*apiextensionsv1.CustomResourceDefinition)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := e.crds.Get(ctx, client.ObjectKey{Name: plural + "." + group}, crd); err != nil {
			return err
		}
		change(crd)
		return e.crds.Update(ctx, crd)
	})
}

// crd reads the CRD of plural.
func (e *env) crd(t *testing.T, plural string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := e.crds.Get(t.Context(), client.ObjectKey{Name: plural + "." + group}, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// gvr is the resource of plural in version.
func gvr(version, plural string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: group, Version: version, Resource: plural}
}

// waitServed waits until the resources (both when none is named) answer a
// list in version, and discovery lists them: the API server serves the
// version.
func (e *env) waitServed(t *testing.T, version string, plurals ...string) {
	t.Helper()
	if len(plurals) == 0 {
		for _, k := range kinds {
			plurals = append(plurals, k.plural)
		}
	}
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("%v served in %s", plurals, version), func() (bool, string) {
		for _, p := range plurals {
			if _, err := e.dyn.Resource(gvr(version, p)).Namespace(plugins.Namespace).List(t.Context(), metav1.ListOptions{Limit: 1}); err != nil {
				return false, fmt.Sprintf("list %s: %v", p, err)
			}
		}
		hashes, err := e.storageHashes(version)
		if err != nil {
			return false, fmt.Sprintf("discovery: %v", err)
		}
		for _, p := range plurals {
			if hashes[p] == "" {
				return false, fmt.Sprintf("discovery lists no %s: %v", p, hashes)
			}
		}
		return true, ""
	})
}

// waitNotServed waits until version answers 404 Not Found for both resources.
func (e *env) waitNotServed(t *testing.T, version string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, "neither resource served in "+version, func() (bool, string) {
		for _, k := range kinds {
			_, err := e.dyn.Resource(gvr(version, k.plural)).Namespace(plugins.Namespace).List(t.Context(), metav1.ListOptions{Limit: 1})
			if !apierrors.IsNotFound(err) {
				return false, fmt.Sprintf("list %s: %v", k.plural, err)
			}
		}
		return true, ""
	})
}

// storageHashes are the storage version hashes discovery reports for the
// resources in version, by plural: the opaque token a storage migrator
// watches to learn that the API server now writes another version.
func (e *env) storageHashes(version string) (map[string]string, error) {
	list, err := e.disc.ServerResourcesForGroupVersion(group + "/" + version)
	if err != nil {
		return nil, err
	}
	hashes := map[string]string{}
	for _, r := range list.APIResources {
		if slices.ContainsFunc(kinds, func(k struct{ plural, file, kind string }) bool { return k.plural == r.Name }) {
			if r.StorageVersionHash == "" {
				return nil, errors.New(r.Name + " has no storage version hash")
			}
			hashes[r.Name] = r.StorageVersionHash
		}
	}
	return hashes, nil
}
