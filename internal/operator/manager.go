package operator

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust"
)

// ManagerOptions returns manager options confined to the openfief namespace
// (D-15): the cache watches nothing elsewhere.
func ManagerOptions(s *runtime.Scheme) ctrl.Options {
	return ctrl.Options{
		Scheme: s,
		Cache:  cache.Options{DefaultNamespaces: map[string]cache.Config{plugins.Namespace: {}}},
	}
}

// Reconcilers is everything the operator runs in one manager.
type Reconcilers struct {
	Plugins *PluginReconciler
	Grants  *GrantReconciler
	Pruner  *AllowListPruner
}

// Setup registers the Plugin and PluginGrant reconcilers and the allow-list
// pruner with mgr, all sharing mgr's client.
func Setup(mgr ctrl.Manager, images trust.ImageChecker, cluster ClusterConfig) (*Reconcilers, error) {
	c := mgr.GetClient()
	r := &Reconcilers{
		Plugins: &PluginReconciler{Client: c, Images: images, Cluster: cluster},
		Grants:  &GrantReconciler{Client: c},
		Pruner:  &AllowListPruner{Client: c},
	}
	if err := r.Plugins.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up plugin reconciler: %w", err)
	}
	if err := r.Grants.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up grant reconciler: %w", err)
	}
	if err := r.Pruner.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up allow-list pruner: %w", err)
	}
	return r, nil
}
