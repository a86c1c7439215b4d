package operator

import (
	"context"
	"fmt"
	"reflect"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager owns every field the operator applies to a plugin's objects.
const FieldManager = "openfief-operator"

// apply server-side applies obj (its status and creation time left out) as
// FieldManager, taking over the fields another manager changed, and returns
// the object as the API server answered, whole.
func apply(ctx context.Context, c client.Client, obj client.Object) (client.Object, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %s: %w", describe(obj), err)
	}
	delete(u, "status")
	if meta, ok := u["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	if np, ok := obj.(*networkingv1.NetworkPolicy); ok {
		ownEmptyRules(u, np)
	}
	answer := &unstructured.Unstructured{Object: u}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(answer), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("apply %s: %w", describe(obj), err)
	}
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(answer.Object, out); err != nil {
		return nil, fmt.Errorf("read the answer to the apply of %s: %w", describe(obj), err)
	}
	return out, nil
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
// (compared with the API server's defaults ignored). Where current is a
// compacted copy (compactOwned), a Deployment's pod spec and a
// NetworkPolicy's spec are compared by the digests it keeps instead
// (compactedHeld, OF-16).
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

func describe(obj client.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		kind = fmt.Sprintf("%T", obj)
	}
	return kind + " " + obj.GetName()
}
