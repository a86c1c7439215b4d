package operator

import (
	"context"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
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
		Watches(&corev1.ConfigMap{}, allowListChanges(everyPlugin), builder.WithPredicates(inNamespace, named(plugins.AllowListConfigMap))).
		Complete(r)
}

// allowListChanges maps events of the allow-list ConfigMap to Plugins. A
// created or deleted ConfigMap reconciles every Plugin (all), an update only
// the Plugins whose entries changed: each Plugin's own apply changes only its
// own key, so a pass over every Plugin on every apply would make the work
// grow with the square of the number of Plugins. A hand edit or deletion of
// an entry still reaches the Plugin it belongs to, which restores it.
func allowListChanges(all handler.EventHandler) handler.EventHandler {
	return handler.Funcs{
		CreateFunc:  all.Create,
		DeleteFunc:  all.Delete,
		GenericFunc: all.Generic,
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			oldCM, ok1 := e.ObjectOld.(*corev1.ConfigMap)
			newCM, ok2 := e.ObjectNew.(*corev1.ConfigMap)
			if !ok1 || !ok2 {
				return
			}
			for _, name := range changedKeys(oldCM.Data, newCM.Data) {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: plugins.Namespace, Name: name}})
			}
		},
	}
}

// changedKeys lists the keys whose values differ between a and b, or that
// only one of them has, sorted.
func changedKeys(a, b map[string]string) []string {
	set := map[string]bool{}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			set[k] = true
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			set[k] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
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
