package operator

import (
	"encoding/json"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// cacheOptions are the options of the manager's cache, which
// PluginReconciler.Client and every other reconciler's Client read from. It
// watches the openfief namespace only (D-15) and keeps a cut-down copy of
// each object, made by compactForCache as it enters (OF-15, OF-16):
//   - managed fields: none, except on a ServiceAccount or a Deployment the
//     operator's own applied entry (FieldManager), cut to the
//     imagePullSecrets list it owns (what pullsecrets.go reads);
//   - a Deployment's pod spec: replaced by the digest of the part the
//     operator applied (CachedSpecDigestAnnotation), keeping only the
//     ServiceAccount name, the (init) containers' names and images (the
//     running gate, gatekeep.go) and the pull
//     Secrets (cachedigest.go);
//   - a NetworkPolicy's spec: replaced by its digest (cachedigest.go);
//   - a Deployment's status: only what deploymentAvailable reads (the
//     observed generation, the updated replicas and whether it is
//     Available), no other condition, reason, message or time;
//   - the namespace, label keys and values and owner references' API
//     version and kind: shared constants instead of copies (cacheintern.go).
//
// So a cached Deployment or NetworkPolicy is never a whole object: holds
// compares it by digest (compactedHeld), and no write sends a cached copy
// whole (the operator applies objects it builds, and patches only the
// fields it changes). Where
// the cache may be behind, the Plugin reconciler reads the API server
// itself through PluginReconciler.Reader (readRunning, nextRecord); those
// live reads are whole objects without the digest annotation.
func cacheOptions() cache.Options {
	return cache.Options{
		DefaultNamespaces: map[string]cache.Config{plugins.Namespace: {Transform: compactForCache}},
		DefaultTransform:  compactForCache,
	}
}

// compactForCache is the cache's transform (OF-15, OF-16), as cacheOptions
// lists: it replaces a Deployment's pod spec and a NetworkPolicy's spec by
// their digests (compactDeployment,
// compactNetworkPolicy; the Deployment's needs the managed fields whole, so
// it goes first), then drops every managed field but the operator's own
// applied imagePullSecrets, then shares the strings every plugin's objects
// repeat (internCached). It changes in place the object it was handed,
// which was just decoded and is the cache's alone. An object without managed
// fields (a delete's tombstone) passes unchanged.
func compactForCache(in any) (any, error) {
	obj, err := apimeta.Accessor(in)
	if err != nil || obj.GetManagedFields() == nil {
		return in, nil // a tombstone, or nothing to drop
	}
	switch o := in.(type) {
	case *appsv1.Deployment:
		compactDeployment(o)
		compactDeploymentStatus(o)
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

// compactDeploymentStatus cuts d's status down to what deploymentAvailable
// reads: its observed generation, its updated replicas and the Available
// condition's type and status. The Deployment controller's conditions carry
// reasons, messages and times the operator never reads (OF-16).
func compactDeploymentStatus(d *appsv1.Deployment) {
	var kept []appsv1.DeploymentCondition
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			kept = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: c.Status}}
			break
		}
	}
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Status.ObservedGeneration,
		UpdatedReplicas:    d.Status.UpdatedReplicas,
		Conditions:         kept,
	}
}
