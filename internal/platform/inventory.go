package platform

import (
	"context"
	"fmt"
	"slices"

	"golang.org/x/mod/semver"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// Owned lists every object in the cluster labelled as the command's
// (LabelManagedBy=ValueManagedBy) of the kinds a platform overlay may hold,
// in apply order. A kind the API server does not serve holds none.
func Owned(ctx context.Context, c client.Client) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, k := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
		opts := []client.ListOption{client.MatchingLabels{LabelManagedBy: ValueManagedBy}}
		if k.namespaced {
			opts = append(opts, client.InNamespace(plugins.Namespace))
		}
		if err := c.List(ctx, list, opts...); err != nil {
			if apimeta.IsNoMatchError(err) {
				continue
			}
			return nil, fmt.Errorf("list %s: %w", k.gvk.Kind, err)
		}
		for i := range list.Items {
			u := &list.Items[i]
			u.SetGroupVersionKind(k.gvk)
			out = append(out, u)
		}
	}
	slices.SortStableFunc(out, compareObjects)
	return out, nil
}

// InstalledVersion is the highest LabelVersion among objs (a half-done
// upgrade leaves two), "" when none carries one.
func InstalledVersion(objs []*unstructured.Unstructured) string {
	v := ""
	for _, u := range objs {
		if l := u.GetLabels()[LabelVersion]; l != "" && (v == "" || compareVersions(l, v) > 0) {
			v = l
		}
	}
	return v
}

// CheckUpgrade refuses to go from installed to next when next is older,
// unless allowDowngrade: versions compare as semantic versions (Go's
// pseudo-versions, which hack/release stamps on builds of a commit, order
// by their time). A version that is not one cannot be compared and is
// refused the same way.
func CheckUpgrade(installed, next string, allowDowngrade bool) error {
	if allowDowngrade || installed == "" || installed == next {
		return nil
	}
	if !semver.IsValid(installed) || !semver.IsValid(next) {
		return fmt.Errorf("cannot tell whether %s is older than the installed %s (not both semantic versions): pass --allow-downgrade to apply it anyway", next, installed)
	}
	if semver.Compare(next, installed) < 0 {
		return fmt.Errorf("%s is older than the installed %s: refusing a downgrade; pass --allow-downgrade to roll back on purpose", next, installed)
	}
	return nil
}

// compareVersions orders two version labels: by semantic version when both
// are one, else by text.
func compareVersions(a, b string) int {
	if semver.IsValid(a) && semver.IsValid(b) {
		return semver.Compare(a, b)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Installed reports whether owned (the command's objects in the cluster)
// holds more than the data an uninstall keeps (the CRDs, the namespace, the
// core's claim): a platform to upgrade, inspect or refuse to install twice.
func Installed(owned []*unstructured.Unstructured) bool {
	return slices.ContainsFunc(owned, func(u *unstructured.Unstructured) bool { return !keptKinds[u.GetKind()] })
}
