package operator

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// AllowListPruner removes allow-list keys whose Plugin no longer exists
// (OF-3). It reconciles the allow-list ConfigMap, so it runs
// when the operator starts (the cache's first list) and on every change to
// the ConfigMap, closing the gap of a Plugin deleted while the operator was
// down.
type AllowListPruner struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
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

// Reconcile prunes orphaned keys of the allow-list ConfigMap.
func (r *AllowListPruner) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.NamespacedName != allowListKey {
		return ctrl.Result{}, nil
	}
	// Every read is read-only and skips the copy: the ConfigMap holds every
	// plugin's key and this runs on every change to it, so it looks each
	// key's Plugin up in the cache rather than list them all (OF-15).
	var cm corev1.ConfigMap
	if err := r.Client.Get(ctx, allowListKey, &cm, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var orphans []string
	for k := range cm.Data {
		var p v1alpha1.Plugin
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: plugins.Namespace, Name: k}, &p, client.UnsafeDisableDeepCopy)
		switch {
		case apierrors.IsNotFound(err), err == nil && !p.DeletionTimestamp.IsZero():
			orphans = append(orphans, k)
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("read plugin %s: %w", k, err)
		}
	}
	slices.Sort(orphans)
	if len(orphans) == 0 {
		return ctrl.Result{}, nil
	}
	remove := make(map[string]*string, len(orphans))
	for _, k := range orphans {
		remove[k] = nil
	}
	return ctrl.Result{}, writeAllowList(ctx, r.Client, remove)
}
