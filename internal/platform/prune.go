package platform

import (
	"context"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// keptKinds are never pruned: removing a CRD would delete every Plugin and
// PluginGrant, the namespace everything in it, and the claim the core's
// data. An upgrade that drops one leaves it and says so; uninstall
// --delete-data removes them.
var keptKinds = map[string]bool{"CustomResourceDefinition": true, "Namespace": true, "PersistentVolumeClaim": true}

// Stale returns the objects of owned (the command's, in the cluster) that s
// no longer holds, split into those Prune deletes and those it keeps.
func Stale(s *Set, owned []*unstructured.Unstructured) (prune, keep []*unstructured.Unstructured) {
	in := map[string]bool{}
	for _, u := range s.Objects {
		in[key(u)] = true
	}
	for _, u := range owned {
		switch {
		case in[key(u)]:
		case keptKinds[u.GetKind()]:
			keep = append(keep, u)
		default:
			prune = append(prune, u)
		}
	}
	return prune, keep
}

// Prune deletes the command's objects that s no longer holds (Stale), in
// reverse apply order, and names each, and each it keeps, on out.
func Prune(ctx context.Context, c client.Client, s *Set, owned []*unstructured.Unstructured, out io.Writer) error {
	prune, keep := Stale(s, owned)
	for i := len(prune) - 1; i >= 0; i-- {
		u := prune[i]
		if err := c.Delete(ctx, u, client.PropagationPolicy("Background")); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("prune %s: %w", describe(u), err)
		}
		fmt.Fprintf(out, "pruned %s (not in version %s)\n", describe(u), s.Version)
	}
	for _, u := range keep {
		fmt.Fprintf(out, "kept %s: not in version %s, but removing it would delete data; delete it yourself when it is no longer needed\n", describe(u), s.Version)
	}
	return nil
}
