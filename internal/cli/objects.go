package cli

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
)

// getPlugin reads the Plugin name; a missing one is ExitNotFound.
func (e *Env) getPlugin(ctx context.Context, c client.Client, name string) (*v1alpha1.Plugin, error) {
	var p v1alpha1.Plugin
	err := c.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: name}, &p)
	switch {
	case apierrors.IsNotFound(err):
		return nil, exitf(ExitNotFound, "plugin %q not found in namespace %q (see: openfief plugin list)", name, e.Namespace)
	case err != nil:
		return nil, apiError("reading plugin "+name, err)
	}
	return &p, nil
}

// getGrant reads the PluginGrant name, nil when there is none.
func (e *Env) getGrant(ctx context.Context, c client.Client, name string) (*v1alpha1.PluginGrant, error) {
	var g v1alpha1.PluginGrant
	err := c.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: name}, &g)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, apiError("reading plugingrant "+name, err)
	}
	return &g, nil
}

// writeError gives a failed write its exit code: a conflict means the
// object changed meanwhile, an invalid object names the API server's field.
func writeError(what string, err error) error {
	switch {
	case apierrors.IsConflict(err):
		return exitf(ExitFailure, "%s: changed while this command ran; run it again: %w", what, err)
	case apierrors.IsAlreadyExists(err):
		return exitf(ExitNothingToDo, "%s: %w", what, err)
	case apierrors.IsNotFound(err):
		return exitf(ExitNotFound, "%s: %w", what, err)
	case apierrors.IsInvalid(err):
		return exitf(ExitInvalid, "%s: %w", what, err)
	default:
		return apiError(what, err)
	}
}

// apiError is a failed request with ExitFailure, saying so when the
// openfief.io CRDs are missing from the cluster.
func apiError(what string, err error) error {
	if apimeta.IsNoMatchError(err) {
		return exitf(ExitFailure, "%s: %w (are the openfief.io CRDs installed? kubectl apply -k deploy/crds)", what, err)
	}
	return exitf(ExitFailure, "%s: %w", what, err)
}
