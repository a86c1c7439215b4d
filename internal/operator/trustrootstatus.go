package operator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// TrustRootFieldManager owns the status ConfigMap openfief-sigstore-root-status.
const TrustRootFieldManager = "openfief-operator/sigstore-root"

// trustRootStatusKey is the publisher's one reconcile request.
var trustRootStatusKey = types.NamespacedName{Namespace: plugins.Namespace, Name: plugins.TrustRootStatusConfigMap}

// trustRootPublisher writes which Sigstore root the operator verifies
// keyless signatures with, and the admin's content it refused last, into
// openfief-sigstore-root-status, where `openfief check` reads it. It runs
// in the leader: at start, whenever trustRoots applied a version of the
// admin's ConfigMap, and when the status ConfigMap itself changes (so an
// edit or a deletion is undone).
type trustRootPublisher struct {
	client client.Client
	roots  *trustRoots
}

func (p *trustRootPublisher) SetupWithManager(mgr ctrl.Manager) error {
	isStatus := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == trustRootStatusKey.Namespace && o.GetName() == trustRootStatusKey.Name
	})
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: trustRootStatusKey}}
	})
	atStart := source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(reconcile.Request{NamespacedName: trustRootStatusKey})
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("sigstore-root-status").
		For(&corev1.ConfigMap{}, builder.WithPredicates(isStatus)).
		WatchesRawSource(atStart).
		WatchesRawSource(source.Channel(p.roots.changed, one)).
		Complete(p)
}

// Reconcile publishes the status; a failure is retried with back-off.
func (p *trustRootPublisher) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	return reconcile.Result{}, p.publish(ctx)
}

// publish applies the status when the published one differs.
func (p *trustRootPublisher) publish(ctx context.Context) error {
	raw, err := plugins.EncodeTrustRootStatus(p.roots.status())
	if err != nil {
		return fmt.Errorf("encode the Sigstore root's status: %w", err)
	}
	data := map[string]string{plugins.TrustRootStatusKey: raw}
	labels := map[string]string{plugins.LabelManagedBy: plugins.ValueManagedBy}
	var current corev1.ConfigMap
	switch err := p.client.Get(ctx, trustRootStatusKey, &current); {
	case err == nil && holdsAll(current.Data, data) && holdsAll(current.Labels, labels):
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("read %s: %w", trustRootStatusKey, err)
	}
	ac := corev1ac.ConfigMap(trustRootStatusKey.Name, trustRootStatusKey.Namespace).WithLabels(labels).WithData(data)
	if err := p.client.Apply(ctx, ac, client.FieldOwner(TrustRootFieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s: %w", trustRootStatusKey, err)
	}
	ctrllog.FromContext(ctx).Info("published the Sigstore root in use", "configMap", trustRootStatusKey.String())
	return nil
}
