package operator

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// cacheOptions are the options of the manager's cache, which
// PluginReconciler.Client and every other reconciler's Client read from. It
// watches the openfief namespace only (D-15) and holds whole objects but for
// their managed fields, with the strings every plugin's objects repeat
// shared (stripForCache): the Plugins and PluginGrants, and the platform's
// own objects of the kinds a plugin owns (the core's and the proxy's
// Services, the allow-list and the other platform ConfigMaps). It never
// holds an object the operator built for a plugin: those are in the owned
// cache, as metadata only (newOwnedCache, OF-63), and pluginObjects keeps
// them out of this one, so a read of one from here finds nothing rather
// than a whole copy kept for every plugin.
func cacheOptions() cache.Options {
	notPlugins := cache.ByObject{Label: pluginObjects(selection.DoesNotExist)}
	byObject := map[client.Object]cache.ByObject{}
	for _, proto := range []client.Object{&corev1.ServiceAccount{}, &corev1.ConfigMap{}, &corev1.Service{}, &networkingv1.NetworkPolicy{}, &appsv1.Deployment{}} {
		byObject[proto] = notPlugins
	}
	return cache.Options{
		DefaultNamespaces: map[string]cache.Config{plugins.Namespace: {Transform: stripForCache}},
		DefaultTransform:  stripForCache,
		ByObject:          byObject,
	}
}

// stripForCache is the caches' transform: it drops an object's managed
// fields, which nothing reads from a cache (holds reads them from whole
// objects read live, pullsecrets.go), then lets it share the strings every
// plugin's objects repeat (internCached). It changes in place the object it
// was handed, which was just decoded and is the cache's alone. An object
// without managed fields (a delete's tombstone) passes unchanged.
func stripForCache(in any) (any, error) {
	obj, err := apimeta.Accessor(in)
	if err != nil || obj.GetManagedFields() == nil {
		return in, nil // a tombstone, or nothing to drop
	}
	obj.SetManagedFields(nil)
	if o, ok := in.(client.Object); ok {
		internCached(o)
	}
	return in, nil
}
