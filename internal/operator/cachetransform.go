package operator

import (
	"encoding/json"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// keepOwnManagedFields is the cache's transform (OF-15): before an object is
// cached it drops the managed fields the operator never reads, which are
// most of what a cached object weighs (on a Deployment, the field set of
// every applied field). What stays is what pullsecrets.go reads: on a
// ServiceAccount or a Deployment, FieldManager's applied entry, cut down to
// the imagePullSecrets list it owns. A Deployment's pod spec and a
// NetworkPolicy's spec are first replaced by their digests
// (compactDeployment, compactNetworkPolicy, OF-16); the Deployment's needs
// the managed fields whole. Last, the strings every plugin's objects repeat
// are shared (internCached).
func keepOwnManagedFields(in any) (any, error) {
	obj, err := apimeta.Accessor(in)
	if err != nil || obj.GetManagedFields() == nil {
		return in, nil // a tombstone, or nothing to drop
	}
	switch o := in.(type) {
	case *appsv1.Deployment:
		compactDeployment(o)
	case *networkingv1.NetworkPolicy:
		compactNetworkPolicy(o)
	}
	var path []string
	switch in.(type) {
	case *corev1.ServiceAccount:
		path = []string{"imagePullSecrets"}
	case *appsv1.Deployment:
		path = []string{"spec", "template", "spec", "imagePullSecrets"}
	}
	var kept []metav1.ManagedFieldsEntry
	if path != nil {
		for _, e := range obj.GetManagedFields() {
			if e.Manager == FieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.FieldsV1 != nil {
				e.FieldsV1 = metav1.NewFieldsV1(string(fieldsAt(e.FieldsV1.GetRawBytes(), path)))
				e.Time = nil
				kept = append(kept, e)
			}
		}
	}
	obj.SetManagedFields(kept)
	if o, ok := in.(client.Object); ok {
		internCached(o)
	}
	return in, nil
}

// fieldsAt cuts a FieldsV1 set down to the subtree at path (f:-prefixed
// keys), keeping the path itself; an empty set when the path is not there,
// and the set unchanged when it cannot be read, so a reader fails as it
// would have.
func fieldsAt(raw []byte, path []string) []byte {
	var fields map[string]any
	if err := json.Unmarshal(raw, &fields); err != nil {
		return raw
	}
	cur := fields
	for _, p := range path {
		next, ok := cur["f:"+p].(map[string]any)
		if !ok {
			return []byte("{}")
		}
		cur = next
	}
	var sub any = cur
	for i := len(path) - 1; i >= 0; i-- {
		sub = map[string]any{"f:" + path[i]: sub}
	}
	out, err := json.Marshal(sub)
	if err != nil {
		return raw
	}
	return out
}
