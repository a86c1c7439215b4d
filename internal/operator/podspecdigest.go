package operator

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
)

// CachedPodSpecDigestAnnotation is set on the operator cache's copy of a
// plugin's Deployment only, never on the cluster's object: the SHA-256 of
// the pod spec fields the operator's field manager applied, with the values
// they have now (OF-16). The cache keeps that digest in place of the pod
// spec, which is most of what a cached Deployment weighs.
const CachedPodSpecDigestAnnotation = "openfief.io/cached-pod-spec-digest"

// compactDeployment replaces d's pod spec by the digest of the part the
// operator owns (OF-16), keeping what the reconciler reads besides holds:
// the ServiceAccount name and the container images (the record of the
// running version, verified.go) and the image pull Secrets
// (pullsecrets.go). The owned part is what server-side apply says
// FieldManager applied (client-go's ExtractDeployment, which knows which
// structs and lists are atomic), with the values the object has now, so:
//   - a field the operator set and someone changed by update moves to that
//     manager and leaves the owned part: the digest differs and the next
//     reconcile applies again, as comparing whole objects did;
//   - defaults the API server added and fields other managers added are not
//     in it, as comparing whole objects ignored them.
//
// d is left whole when the extraction fails, and holds then compares it
// field by field.
func compactDeployment(d *appsv1.Deployment) {
	ac, err := appsv1ac.ExtractDeployment(d, FieldManager)
	if err != nil {
		return
	}
	var owned any
	if ac.Spec != nil && ac.Spec.Template != nil && ac.Spec.Template.Spec != nil {
		owned = ac.Spec.Template.Spec
	}
	sum, err := podSpecDigest(owned)
	if err != nil {
		return
	}
	full := d.Spec.Template.Spec
	kept := corev1.PodSpec{ServiceAccountName: full.ServiceAccountName, ImagePullSecrets: full.ImagePullSecrets}
	for _, c := range full.Containers {
		kept.Containers = append(kept.Containers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	d.Spec.Template.Spec = kept
	annotations := maps.Clone(d.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[CachedPodSpecDigestAnnotation] = sum
	d.Annotations = annotations
}

// podSpecDigest is the hex SHA-256 of v's JSON form (a PodSpec or its apply
// configuration) with null values left out and object keys sorted, so the
// spec the operator builds and the part of the cluster's spec it owns give
// the same digest when they hold the same values. Empty objects and lists
// stay: `emptyDir: {}` says which volume source.
func podSpecDigest(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return "", err
	}
	canonical, err := json.Marshal(withoutNulls(tree))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:]), nil
}

// withoutNulls drops the null members of every object in v.
func withoutNulls(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if child == nil {
				delete(t, k)
				continue
			}
			t[k] = withoutNulls(child)
		}
	case []any:
		for i, child := range t {
			t[i] = withoutNulls(child)
		}
	}
	return v
}

// podSpecHeld reports, for a Deployment the cache holds compacted, whether
// its owned pod spec digest is desired's; compacted is false when current
// is not such a copy (a live read, or an extraction that failed), and holds
// then compares the pod specs field by field.
func podSpecHeld(current, desired *appsv1.Deployment) (held, compacted bool) {
	sum, ok := current.Annotations[CachedPodSpecDigestAnnotation]
	if !ok {
		return false, false
	}
	want, err := podSpecDigest(&desired.Spec.Template.Spec)
	return err == nil && want == sum, true
}
