package operator

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// SetupWithManager registers the PluginReconciler. A Plugin reconciles on a
// change to itself or to any of the five objects it owns (so a hand edit is
// re-applied), on a change to the PluginGrant of the same name, and, for
// every Plugin, on a change to the core's or the proxy's Service or to the
// allow-list ConfigMap. Requests outside openfief are ignored.
func (r *PluginReconciler) SetupWithManager(mgr ctrl.Manager) error {
	inNamespace := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == plugins.Namespace })
	everyPlugin := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list v1alpha1.PluginList
		if err := mgr.GetClient().List(ctx, &list, client.InNamespace(plugins.Namespace)); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, p := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
		}
		return reqs
	})
	named := func(names ...string) predicate.Predicate {
		return predicate.NewPredicateFuncs(func(o client.Object) bool {
			for _, n := range names {
				if o.GetName() == n {
					return true
				}
			}
			return false
		})
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("plugin").
		For(&v1alpha1.Plugin{}, builder.WithPredicates(inNamespace)).
		Owns(&corev1.ServiceAccount{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Service{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Owns(&appsv1.Deployment{}).
		Watches(&v1alpha1.PluginGrant{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(inNamespace)).
		Watches(&corev1.Service{}, everyPlugin, builder.WithPredicates(inNamespace, named(r.Cluster.CoreService, r.Cluster.ProxyService))).
		Watches(&corev1.ConfigMap{}, everyPlugin, builder.WithPredicates(inNamespace, named(plugins.AllowListConfigMap))).
		Complete(r)
}

// SetupWithManager registers the GrantReconciler.
func (r *GrantReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("plugingrant").
		For(&v1alpha1.PluginGrant{}).
		Complete(r)
}

// SetupWithManager registers the AllowListPruner on the allow-list ConfigMap.
func (r *AllowListPruner) SetupWithManager(mgr ctrl.Manager) error {
	isAllowList := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == plugins.Namespace && o.GetName() == plugins.AllowListConfigMap
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("allowlist-pruner").
		For(&corev1.ConfigMap{}, builder.WithPredicates(isAllowList)).
		Complete(r)
}
