package cli

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
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

// specWriteTries bounds how often updateSpec writes again when only an
// object's status moved under it.
const specWriteTries = 5

// updateSpec writes read, changed by change, as a merge patch of what
// change changed, refused by the API server if the object changed since it
// was read (the patch carries read's resource version). A patch leaves every
// field it does not name as stored, so a field this CLI does not know (one
// a later release added) is kept, not cleared. The operator writes a
// Plugin's and a grant's status moments after every change, so a conflict
// whose fresh object holds the very spec that was read (same UID,
// generation and spec) is written again, change applied to the fresh
// object; one whose spec changed is returned, since the owner was shown the
// other spec.
func updateSpec[T client.Object](ctx context.Context, c client.Client, read T, spec func(T) any, change func(T)) error {
	base := read
	for try := 0; ; try++ {
		w := base.DeepCopyObject().(T)
		change(w)
		err := c.Patch(ctx, w, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), fieldOwner)
		if err == nil || !apierrors.IsConflict(err) || try+1 >= specWriteTries {
			return err
		}
		// A zero object: decoding into a used one may keep its old fields.
		now := reflect.New(reflect.TypeOf(read).Elem()).Interface().(T)
		if gerr := c.Get(ctx, client.ObjectKeyFromObject(read), now); gerr != nil {
			return err
		}
		if now.GetUID() != read.GetUID() || now.GetGeneration() != read.GetGeneration() || !equality.Semantic.DeepEqual(spec(now), spec(read)) {
			return err
		}
		base = now
	}
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
