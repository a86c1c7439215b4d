package operator

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// pluginObjects selects the objects the operator builds for plugins: every
// one carries the plugin's name label (PodLabels). The owned cache holds
// these, as metadata only; the manager's cache holds the other objects of
// the same kinds (the core's and the proxy's Services, the platform's
// ConfigMaps) whole, and never a plugin's (cacheOptions).
func pluginObjects(op selection.Operator) labels.Selector {
	req, err := labels.NewRequirement(plugins.LabelPluginName, op, nil)
	if err != nil {
		panic(fmt.Sprintf("the plugin objects' selector: %v", err)) // a constant label key
	}
	return labels.NewSelector().Add(*req)
}

// ownedPrototypes are empty objects of the five kinds a plugin owns
// (BuildObjects), with meta.
func ownedPrototypes(meta metav1.ObjectMeta) []client.Object {
	return []client.Object{
		&corev1.ServiceAccount{ObjectMeta: meta}, &corev1.ConfigMap{ObjectMeta: meta},
		&corev1.Service{ObjectMeta: meta}, &networkingv1.NetworkPolicy{ObjectMeta: meta},
		&appsv1.Deployment{ObjectMeta: meta},
	}
}

// newOwnedCache builds the cache of the objects plugins own (OF-63): in the
// openfief namespace only (D-15), those pluginObjects selects, metadata
// only (a Get or a watch of metav1.PartialObjectMetadata; nothing else may
// be read from it), with no managed fields and the strings every plugin's
// objects repeat shared (stripForCache). It is added to mgr, which starts
// it with the controllers.
func newOwnedCache(mgr ctrl.Manager) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:           mgr.GetHTTPClient(),
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		DefaultNamespaces:    map[string]cache.Config{plugins.Namespace: {}},
		DefaultLabelSelector: pluginObjects(selection.Exists),
		DefaultTransform:     stripForCache,
	})
	if err != nil {
		return nil, fmt.Errorf("the cache of the plugins' objects: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("add the cache of the plugins' objects: %w", err)
	}
	return c, nil
}

// ownedWatches are the watches of the objects plugins own, from owned (a
// cache newOwnedCache built): a change to one queues the Plugin that
// controls it, so a hand edit or a deletion is seen and undone.
func ownedWatches(mgr ctrl.Manager, owned cache.Cache) ([]source.Source, error) {
	var out []source.Source
	for _, proto := range ownedPrototypes(metav1.ObjectMeta{}) {
		gvk, err := mgr.GetClient().GroupVersionKindFor(proto)
		if err != nil {
			return nil, err
		}
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		out = append(out, source.Kind(owned, m,
			handler.TypedEnqueueRequestForOwner[*metav1.PartialObjectMetadata](mgr.GetScheme(), mgr.GetRESTMapper(), &v1alpha1.Plugin{}, handler.OnlyControllerOwner())))
	}
	return out, nil
}
