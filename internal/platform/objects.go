package platform

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/plugins"
)

const (
	// FieldManager is the field manager of everything the command applies.
	FieldManager = "openfief-platform"
	// LabelManagedBy marks the objects the command applied, with
	// ValueManagedBy; upgrade prunes, and uninstall removes, only those.
	LabelManagedBy = plugins.LabelManagedBy
	// ValueManagedBy is LabelManagedBy's value on the platform's objects.
	ValueManagedBy = "openfief-platform"
	// LabelVersion carries the release's version on every object of a
	// platform overlay (overlay.WritePlatform).
	LabelVersion = "app.kubernetes.io/version"
)

// kind is one kind of object a platform overlay may hold.
type kind struct {
	gvk        schema.GroupVersionKind
	namespaced bool
	// rank orders the apply: the namespace and the CRDs first, identities
	// and rules before what uses them, policies before the pods they
	// confine, Deployments last.
	rank int
}

// crdRank is the last rank applied before the CRDs must be Established.
const crdRank = 1

// kinds are the kinds a platform overlay may hold, the only ones the
// command applies, prunes and removes. Secrets are not among them: a
// credential belongs in the cluster (kubectl create secret), not in an
// overlay the dry run prints.
var kinds = []kind{
	{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, false, 0},
	{schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, false, 1},
	{schema.GroupVersionKind{Version: "v1", Kind: "LimitRange"}, true, 2},
	{schema.GroupVersionKind{Version: "v1", Kind: "ResourceQuota"}, true, 2},
	{schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}, true, 2},
	{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, false, 3},
	{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}, true, 3},
	{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}, false, 4},
	{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}, true, 4},
	{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, true, 5},
	{schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}, true, 6},
	{schema.GroupVersionKind{Version: "v1", Kind: "Service"}, true, 7},
	{schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}, true, 8},
	{schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"}, false, 9},
	{schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"}, false, 10},
	{schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}, true, 11},
	{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, true, 12},
}

// kindOf finds the kind of an object by group and kind (any version).
func kindOf(gk schema.GroupKind) (kind, bool) {
	for _, k := range kinds {
		if k.gvk.GroupKind() == gk {
			return k, true
		}
	}
	return kind{}, false
}

// Set is the platform one overlay renders, in apply order, each object
// labelled as the command's.
type Set struct {
	// Version is the overlay's version (LabelVersion), the same on every
	// object.
	Version string
	// Objects are the objects in apply order: rank, namespace, name.
	Objects []*unstructured.Unstructured
}

// Load renders the overlay in dir with the kustomize API, as `kubectl apply
// -k dir` would, and checks what it holds: only the kinds above, namespaced
// ones in openfief only, no namespace but openfief, one version on every
// object. It labels every object LabelManagedBy=ValueManagedBy.
func Load(dir string) (*Set, error) {
	objs, err := deploy.Render(dir)
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("the overlay %s renders no object", dir)
	}
	s := &Set{}
	seen := map[string]bool{}
	for _, u := range objs {
		k, ok := kindOf(u.GroupVersionKind().GroupKind())
		switch {
		case !ok:
			return nil, fmt.Errorf("%s: the overlay holds a %s, which is not a kind of the platform (%s)", describe(u), u.GroupVersionKind(), kindNames())
		case u.GetName() == "":
			return nil, fmt.Errorf("the overlay holds a %s without a name", u.GetKind())
		case k.namespaced && u.GetNamespace() != plugins.Namespace:
			return nil, fmt.Errorf("%s: the platform's namespaced objects live in %s only", describe(u), plugins.Namespace)
		case !k.namespaced && u.GetNamespace() != "":
			return nil, fmt.Errorf("%s: a %s has no namespace", describe(u), u.GetKind())
		case u.GetKind() == "Namespace" && u.GetName() != plugins.Namespace:
			return nil, fmt.Errorf("%s: the platform has one namespace, %s", describe(u), plugins.Namespace)
		}
		if seen[key(u)] {
			return nil, fmt.Errorf("%s: the overlay holds it twice", describe(u))
		}
		seen[key(u)] = true
		v := u.GetLabels()[LabelVersion]
		switch {
		case v == "":
			return nil, fmt.Errorf("%s has no %s label: write the overlay with `make release-overlay` (hack/release), which sets the version on every object", describe(u), LabelVersion)
		case s.Version == "":
			s.Version = v
		case v != s.Version:
			return nil, fmt.Errorf("%s is of version %s, other objects of %s: an overlay is one version", describe(u), v, s.Version)
		}
		labels := u.GetLabels()
		labels[LabelManagedBy] = ValueManagedBy
		u.SetLabels(labels)
		s.Objects = append(s.Objects, u)
	}
	if errs := validation.IsValidLabelValue(s.Version); len(errs) > 0 {
		return nil, fmt.Errorf("version %q: %v", s.Version, errs)
	}
	slices.SortStableFunc(s.Objects, compareObjects)
	return s, nil
}

// compareObjects orders objects for applying and printing: by rank, then
// kind, namespace and name.
func compareObjects(a, b *unstructured.Unstructured) int {
	ka, _ := kindOf(a.GroupVersionKind().GroupKind())
	kb, _ := kindOf(b.GroupVersionKind().GroupKind())
	return cmp.Or(cmp.Compare(ka.rank, kb.rank), cmp.Compare(a.GetKind(), b.GetKind()),
		cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
}

// Deployments are the set's Deployments.
func (s *Set) Deployments() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range s.Objects {
		if u.GroupVersionKind().GroupKind() == (schema.GroupKind{Group: "apps", Kind: "Deployment"}) {
			out = append(out, u)
		}
	}
	return out
}

// HasAPIServerPlaceholder reports whether the core's NetworkPolicy still
// names deploy.APIServerPlaceholder, which the installer fills in.
func (s *Set) HasAPIServerPlaceholder() bool {
	return deploy.APIServerPlaceholders(s.Objects) > 0
}

// SetAPIServer names cidrs as the API server in the core's NetworkPolicy,
// replacing the placeholder, and returns how many rules it changed.
func (s *Set) SetAPIServer(cidrs []string) (int, error) {
	return deploy.SetAPIServer(s.Objects, cidrs)
}

// key identifies an object across versions of its kind.
func key(u *unstructured.Unstructured) string {
	gk := u.GroupVersionKind().GroupKind()
	return gk.String() + "/" + u.GetNamespace() + "/" + u.GetName()
}

// describe names an object as errors and progress lines do:
// "Deployment openfief/openfief-core".
func describe(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetKind() + " " + u.GetName()
	}
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

// kindNames lists the kinds a platform overlay may hold.
func kindNames() string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.gvk.Kind
	}
	return fmt.Sprint(names)
}

// Kind is one kind of object a platform overlay may hold, as `openfief
// check --pre` asks whether the admin may write it.
type Kind struct {
	// GVK is the kind's group, version and kind.
	GVK schema.GroupVersionKind
	// Namespaced says whether its objects live in the platform namespace.
	Namespaced bool
}

// Kinds lists the kinds an install applies, in apply order.
func Kinds() []Kind {
	out := make([]Kind, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, Kind{GVK: k.gvk, Namespaced: k.namespaced})
	}
	return out
}
