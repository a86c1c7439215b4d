package operator

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CachedSpecDigestAnnotation is set on compacted copies (compactOwned) of a
// plugin's Deployment and NetworkPolicy only, never on the cluster's
// objects: the SHA-256 of the spec the copy left out (OF-16). For a
// Deployment it is the part of the pod spec the operator's field manager
// applied, with the values it has now; for a NetworkPolicy the whole spec.
const CachedSpecDigestAnnotation = "openfief.io/cached-spec-digest"

// compactOwned replaces, in obj (a copy of a plugin's object read whole or
// answered to an apply), a Deployment's pod spec and a NetworkPolicy's spec
// by their digests (compactDeployment, compactNetworkPolicy), which holds
// then compares with desired's (compactedHeld). Comparing the part the
// operator applied, not the whole object, is what lets an item another
// manager added to a list hold: server-side apply leaves it, so a whole
// comparison would apply again on every pass without removing it. Other
// kinds are left as they are.
func compactOwned(obj client.Object) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		compactDeployment(o)
	case *networkingv1.NetworkPolicy:
		compactNetworkPolicy(o)
	}
}

// compactDeployment replaces d's pod spec by the digest of the part the
// operator owns (OF-16), keeping what the reconciler reads besides holds:
// the ServiceAccount name and the container images (the running gate,
// gatekeep.go) and the image pull Secrets (pullsecrets.go). The owned part is what server-side apply says
// FieldManager applied (client-go's ExtractDeployment, which knows which
// structs and lists are atomic), with the values the object has now, so:
//   - a field the operator set and someone changed by update moves to that
//     manager and leaves the owned part: the digest differs and the next
//     reconcile applies again;
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
	sum, err := specDigest(owned)
	if err != nil {
		return
	}
	full := d.Spec.Template.Spec
	kept := corev1.PodSpec{ServiceAccountName: full.ServiceAccountName, ImagePullSecrets: full.ImagePullSecrets}
	for _, c := range full.InitContainers {
		kept.InitContainers = append(kept.InitContainers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	for _, c := range full.Containers {
		kept.Containers = append(kept.Containers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	d.Spec.Template.Spec = kept
	setCachedDigest(d, sum)
}

// compactNetworkPolicy replaces np's spec by its digest (OF-16). The whole
// spec counts, not only the operator's part: its rule lists are atomic, so
// the operator's apply replaces them whole, and a rule anyone added is a
// difference to apply away (apply sends even empty rule lists, so it owns
// them; applyConfiguration). The API server fills nothing in a spec the
// operator builds (it sets every port's protocol and both policy types), so
// a policy as applied has desired's digest.
func compactNetworkPolicy(np *networkingv1.NetworkPolicy) {
	sum, err := specDigest(&np.Spec)
	if err != nil {
		return
	}
	np.Spec = networkingv1.NetworkPolicySpec{}
	setCachedDigest(np, sum)
}

// setCachedDigest sets CachedSpecDigestAnnotation on obj, a copy its caller
// owns, changed in place as the rest.
func setCachedDigest(obj client.Object, sum string) {
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[CachedSpecDigestAnnotation] = sum
	obj.SetAnnotations(annotations)
}

// specDigest is the hex SHA-256 of v's JSON form (a spec or its apply
// configuration) with null values left out and object keys sorted, so the
// spec the operator builds and what the cluster's object holds give the same
// digest when they hold the same values. Empty objects and lists stay:
// `emptyDir: {}` says which volume source.
func specDigest(v any) (string, error) {
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

// compactedHeld compares, for a compacted copy of a Deployment or
// NetworkPolicy, the spec it left out with desired's, by digest: held reports
// whether they are the same, and rest is the pair holds goes on comparing
// field by field (copies with that spec emptied). compacted is false when
// current is not such a copy (another kind, or an object whose managed
// fields could not be read), and holds then compares the objects
// whole.
func compactedHeld(current, desired client.Object) (held, compacted bool, restCurrent, restDesired client.Object) {
	sum, ok := current.GetAnnotations()[CachedSpecDigestAnnotation]
	if !ok {
		return false, false, current, desired
	}
	switch d := desired.(type) {
	case *appsv1.Deployment:
		c, ok := current.(*appsv1.Deployment)
		if !ok {
			return false, true, current, desired
		}
		want, err := specDigest(&d.Spec.Template.Spec)
		if err != nil || want != sum {
			return false, true, current, desired
		}
		d, c = d.DeepCopy(), c.DeepCopy()
		d.Spec.Template.Spec, c.Spec.Template.Spec = corev1.PodSpec{}, corev1.PodSpec{}
		return true, true, c, d
	case *networkingv1.NetworkPolicy:
		if _, ok := current.(*networkingv1.NetworkPolicy); !ok {
			return false, true, current, desired
		}
		want, err := specDigest(&d.Spec)
		if err != nil || want != sum {
			return false, true, current, desired
		}
		return true, true, nil, nil
	default:
		return false, true, current, desired
	}
}
