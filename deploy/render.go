package deploy

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Render builds the kustomization in dir with the kustomize API, as
// `kubectl apply -k dir` would, and returns its objects in kustomize's order.
// The objects hold JSON values as the API machinery expects them (int64
// numbers), so they can be deep-copied and edited with unstructured's helpers.
func Render(dir string) ([]*unstructured.Unstructured, error) {
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	out := make([]*unstructured.Unstructured, 0, len(res.Resources()))
	for _, r := range res.Resources() {
		raw, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("kustomize build %s: %s %s: %w", dir, r.GetKind(), r.GetName(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("kustomize build %s: %s %s: %w", dir, r.GetKind(), r.GetName(), err)
		}
		out = append(out, u)
	}
	return out, nil
}
