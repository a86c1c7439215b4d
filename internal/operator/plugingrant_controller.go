package operator

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// GrantReconciler sets each PluginGrant's Valid condition, so an owner sees a
// mistake in a grant on the grant itself. The Plugin's Ready condition says
// InvalidGrant too.
type GrantReconciler struct {
	// Client reads from the manager's cache (cacheOptions: PluginGrants
	// there are whole but for their managed fields) and writes to the API
	// server.
	Client client.Client
}

// SetupWithManager registers the GrantReconciler on every PluginGrant.
func (r *GrantReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("plugingrant").
		For(&v1alpha1.PluginGrant{}).
		Complete(r)
}

// Reconcile validates one grant and writes its status when it changed.
func (r *GrantReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Namespace != plugins.Namespace {
		return ctrl.Result{}, nil
	}
	var g v1alpha1.PluginGrant
	if err := r.Client.Get(ctx, req.NamespacedName, &g); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	c := condition{metav1.ConditionTrue, v1alpha1.ReasonValid, "the grant is valid"}
	if err := apiconv.GrantFromAPI(&g).Validate(); err != nil {
		c = condition{metav1.ConditionFalse, v1alpha1.ReasonInvalid, err.Error()}
	}
	next := g.Status.DeepCopy()
	next.ObservedGeneration = g.Generation
	setCondition(&next.Conditions, v1alpha1.ConditionValid, c, g.Generation)
	if _, err := writeStatusIfChanged(ctx, r.Client, &g, &g.Status, next); err != nil {
		return ctrl.Result{}, fmt.Errorf("write grant status: %w", err)
	}
	return ctrl.Result{}, nil
}
