package operator

import (
	"encoding/json"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// pullSecretsHeld reports whether current names exactly the image pull
// Secrets desired sets, as far as the operator owns them. holds compares
// only what desired sets, so a pull Secret removed from the grant (and so
// from desired) would never be applied away; the entries the operator's
// field manager applied (metadata.managedFields) show it. Entries another
// manager added are not the operator's to remove and are ignored, so they
// cause no write on every reconcile (OF-4). Objects other than the
// ServiceAccount and the Deployment hold.
func pullSecretsHeld(current, desired client.Object) bool {
	var want, got []corev1.LocalObjectReference
	var path []string
	switch d := desired.(type) {
	case *corev1.ServiceAccount:
		c, ok := current.(*corev1.ServiceAccount)
		if !ok {
			return false
		}
		want, got, path = d.ImagePullSecrets, c.ImagePullSecrets, []string{"imagePullSecrets"}
	case *appsv1.Deployment:
		c, ok := current.(*appsv1.Deployment)
		if !ok {
			return false
		}
		want, got = d.Spec.Template.Spec.ImagePullSecrets, c.Spec.Template.Spec.ImagePullSecrets
		path = []string{"spec", "template", "spec", "imagePullSecrets"}
	default:
		return true
	}
	owned, keyed, ok := ownedPullSecrets(current.GetManagedFields(), path)
	switch {
	case !ok:
		owned = nil
	case !keyed:
		// An atomic list (the ServiceAccount's): whoever applied it last
		// owns all of it.
		owned = refNames(got)
	}
	names := refNames(want)
	slices.Sort(names)
	slices.Sort(owned)
	return slices.Equal(names, owned)
}

// refNames lists the names of refs.
func refNames(refs []corev1.LocalObjectReference) []string {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		out = append(out, r.Name)
	}
	return out
}

// ownedPullSecrets returns the names of the imagePullSecrets entries at path
// that FieldManager applied, read from the managed fields' key set (entries
// keyed `k:{"name":"..."}`); owns reports whether FieldManager owns the list
// at all and keyed whether it lists entries (an atomic list lists none).
func ownedPullSecrets(entries []metav1.ManagedFieldsEntry, path []string) (out []string, keyed, owns bool) {
	for _, e := range entries {
		if e.Manager != FieldManager || e.Operation != metav1.ManagedFieldsOperationApply || e.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil {
			continue
		}
		found := true
		for _, p := range path {
			next, ok := fields["f:"+p].(map[string]any)
			if !ok {
				found = false
				break
			}
			fields = next
		}
		if !found {
			continue
		}
		owns = true
		for k := range fields {
			key, ok := strings.CutPrefix(k, "k:")
			if !ok {
				continue
			}
			keyed = true
			var ref struct {
				Name string `json:"name"`
			}
			if json.Unmarshal([]byte(key), &ref) == nil && ref.Name != "" {
				out = append(out, ref.Name)
			}
		}
	}
	return out, keyed, owns
}
