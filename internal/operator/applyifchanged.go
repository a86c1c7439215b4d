package operator

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager owns every field the operator applies to a plugin's objects.
const FieldManager = "openfief-operator"

// ownedObject is one object BuildObjects produces.
type ownedObject interface {
	client.Object
}

// applyIfChanged server-side applies obj unless the cached copy already holds
// everything obj sets (OF-4: a steady-state reconcile sends no
// write). A hand edit to a field the operator sets makes the copies differ,
// so the next reconcile applies again and the API server restores the field;
// fields that another manager added are left alone by server-side apply.
func applyIfChanged(ctx context.Context, c client.Client, obj ownedObject) (bool, error) {
	current := obj.DeepCopyObject().(client.Object)
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), current)
	switch {
	case err == nil && holds(current, obj):
		return false, nil
	case err != nil && !apierrors.IsNotFound(err):
		return false, fmt.Errorf("read %s: %w", describe(obj), err)
	}
	if err := apply(ctx, c, obj); err != nil {
		return false, err
	}
	return true, nil
}

// apply server-side applies obj (its status and creation time left out) as
// FieldManager, taking over the fields another manager changed.
func apply(ctx context.Context, c client.Client, obj ownedObject) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("convert %s: %w", describe(obj), err)
	}
	delete(u, "status")
	if meta, ok := u["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	if np, ok := obj.(*networkingv1.NetworkPolicy); ok {
		ownEmptyRules(u, np)
	}
	ac := client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u})
	if err := c.Apply(ctx, ac, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s: %w", describe(obj), err)
	}
	return nil
}

// ownEmptyRules puts np's empty rule lists back into u, its unstructured
// form, which leaves empty lists out: applied as `[]`, a list is the
// operator's, so a rule someone adds to a policy that allows nothing moves
// that list to them, shows as a difference (OF-16) and is applied away;
// left out, the operator would own no list and apply would keep the rule.
func ownEmptyRules(u map[string]any, np *networkingv1.NetworkPolicy) {
	spec, ok := u["spec"].(map[string]any)
	if !ok {
		return
	}
	if np.Spec.Ingress != nil && len(np.Spec.Ingress) == 0 {
		spec["ingress"] = []any{}
	}
	if np.Spec.Egress != nil && len(np.Spec.Egress) == 0 {
		spec["egress"] = []any{}
	}
}

// holds reports whether current already carries every field of desired: its
// labels and owner references, and everything desired sets outside metadata
// (compared with the API server's defaults ignored). Where current is the
// cache's copy, a Deployment's pod spec and a NetworkPolicy's spec are
// compared by the digests the cache keeps instead (compactedHeld, OF-16).
func holds(current, desired client.Object) bool {
	for k, v := range desired.GetLabels() {
		if current.GetLabels()[k] != v {
			return false
		}
	}
	for _, want := range desired.GetOwnerReferences() {
		found := false
		for _, got := range current.GetOwnerReferences() {
			if equality.Semantic.DeepEqual(want, got) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if !pullSecretsHeld(current, desired) {
		return false
	}
	if held, compacted, c, d := compactedHeld(current, desired); compacted {
		// The cache left a spec out and kept its digest (OF-16).
		if !held {
			return false
		}
		if c == nil {
			return true
		}
		current, desired = c, d
	} else if np, ok := desired.(*networkingv1.NetworkPolicy); ok && !rulesEqual(np, current) {
		return false
	}
	d, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return false
	}
	c, err := runtime.DefaultUnstructuredConverter.ToUnstructured(current)
	if err != nil {
		return false
	}
	for _, k := range []string{"metadata", "status", "apiVersion", "kind"} {
		delete(d, k)
		delete(c, k)
	}
	return derivative(d, c)
}

// rulesEqual compares a NetworkPolicy's rule lists whole: the converter
// drops empty lists, so derivative alone cannot see that a deny-all policy
// must have none.
func rulesEqual(desired *networkingv1.NetworkPolicy, current client.Object) bool {
	cur, ok := current.(*networkingv1.NetworkPolicy)
	if !ok {
		return false
	}
	return len(desired.Spec.Ingress) == len(cur.Spec.Ingress) && len(desired.Spec.Egress) == len(cur.Spec.Egress) &&
		(len(desired.Spec.Ingress) == 0 || equality.Semantic.DeepDerivative(desired.Spec.Ingress, cur.Spec.Ingress)) &&
		(len(desired.Spec.Egress) == 0 || equality.Semantic.DeepDerivative(desired.Spec.Egress, cur.Spec.Egress))
}

// derivative reports whether every value set in want equals the value in got.
// Maps may hold more keys in got (defaults, other managers); lists must have
// the same length and match item by item.
func derivative(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return len(w) == 0 && got == nil
		}
		for k, wv := range w {
			if !derivative(wv, g[k]) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok {
			return len(w) == 0 && got == nil
		}
		if len(w) != len(g) {
			return false
		}
		for i := range w {
			if !derivative(w[i], g[i]) {
				return false
			}
		}
		return true
	case nil:
		return true
	default:
		return equality.Semantic.DeepEqual(want, got)
	}
}

// deleteIfExists deletes obj from the cluster unless the cache says it is
// already gone, so a torn-down plugin's steady state sends no request.
func deleteIfExists(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("read %s: %w", describe(obj), err)
	}
	if err := c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("delete %s: %w", describe(obj), err)
	}
	return true, nil
}

func describe(obj client.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		kind = fmt.Sprintf("%T", obj)
	}
	return kind + " " + obj.GetName()
}
