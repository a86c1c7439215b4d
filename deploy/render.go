package deploy

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Render builds the kustomization in dir with the kustomize API, as
// `kubectl apply -k dir` would, and returns its objects in kustomize's order.
func Render(dir string) ([]*unstructured.Unstructured, error) {
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	out := make([]*unstructured.Unstructured, 0, len(res.Resources()))
	for _, r := range res.Resources() {
		m, err := r.Map()
		if err != nil {
			return nil, fmt.Errorf("kustomize build %s: %s %s: %w", dir, r.GetKind(), r.GetName(), err)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out, nil
}
