package netpolicy

import (
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Policies picks the NetworkPolicies out of rendered manifests (such as
// deploy.Render's output), in their order; other kinds are skipped. A
// NetworkPolicy that does not convert is an error, never skipped.
func Policies(objs []*unstructured.Unstructured) ([]*networkingv1.NetworkPolicy, error) {
	var out []*networkingv1.NetworkPolicy
	for _, o := range objs {
		if o.GroupVersionKind() != networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy") {
			continue
		}
		var np networkingv1.NetworkPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &np, true); err != nil {
			return nil, fmt.Errorf("NetworkPolicy %s: %w", o.GetName(), err)
		}
		out = append(out, &np)
	}
	return out, nil
}
