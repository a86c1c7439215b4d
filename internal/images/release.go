package images

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/types"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// Unpinned are the image names the committed deploy/operator,
// deploy/egress-proxy and deploy/core carry, by the image they stand for: names in the
// reserved .invalid domain (RFC 2606), so applying deploy/ as committed
// fails to pull with a message that says what to do, instead of running
// an image nobody pinned. A release overlay replaces them by digest.
var Unpinned = map[string]string{
	"operator":      "unpinned.invalid/openfief/operator",
	"egress-proxy":  "unpinned.invalid/openfief/egress-proxy",
	"openfief-core": "unpinned.invalid/openfief/openfief-core",
}

// releaseBases are the install kustomizations a release overlay pins, by
// the image each runs.
var releaseBases = map[string]string{
	"operator":      "operator",
	"egress-proxy":  "egress-proxy",
	"openfief-core": "core",
}

// WriteReleaseOverlay writes outDir/kustomization.yaml: deploy/operator,
// deploy/egress-proxy and deploy/core (under deployDir) with their images set to refs, by
// image name, as `kustomize edit set image <unpinned>=<repo>@sha256:<hex>`
// would. It then renders the overlay with the kustomize API and checks that
// every container runs exactly one of refs, so a mismatch of names fails
// here and not in a cluster. header is written as comment lines on top.
func WriteReleaseOverlay(outDir, deployDir string, refs map[string]plugins.ImageRef, header string) error {
	absOut, err := filepath.Abs(outDir)
	if err != nil {
		return err
	}
	absDeploy, err := filepath.Abs(deployDir)
	if err != nil {
		return err
	}
	k := types.Kustomization{TypeMeta: types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind}}
	names := slices.Sorted(maps.Keys(releaseBases))
	want := map[string]bool{}
	for _, image := range names {
		ref, ok := refs[image]
		if !ok {
			return fmt.Errorf("no digest for the %s image", image)
		}
		rel, err := filepath.Rel(absOut, filepath.Join(absDeploy, releaseBases[image]))
		if err != nil {
			return err
		}
		k.Resources = append(k.Resources, filepath.ToSlash(rel))
		k.Images = append(k.Images, types.Image{Name: Unpinned[image], NewName: ref.Name(), Digest: ref.Digest()})
		want[ref.String()] = true
	}
	raw, err := kyaml.Marshal(k)
	if err != nil {
		return err
	}
	var b strings.Builder
	for line := range strings.Lines(strings.TrimSpace(header)) {
		b.WriteString("# " + strings.TrimRight(line, "\n") + "\n")
	}
	b.Write(raw)
	if err := os.MkdirAll(absOut, 0o755); err != nil {
		return err
	}
	path := filepath.Join(absOut, "kustomization.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	got, err := RenderedImages(absOut)
	if err != nil {
		return err
	}
	for _, img := range got {
		if !want[img] {
			return fmt.Errorf("%s renders image %s, which is not one of the built digests", path, img)
		}
	}
	if len(got) == 0 {
		return fmt.Errorf("%s renders no container", path)
	}
	return nil
}

// RenderedImages builds the kustomization in dir with the kustomize API,
// as `kubectl apply -k` would, and returns the image of every container and
// init container it renders, in order.
func RenderedImages(dir string) ([]string, error) {
	objs, err := deploy.Render(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, u := range objs {
		out = append(out, containerImages(u.Object)...)
	}
	return out, nil
}

// containerImages finds the images of every containers and initContainers
// list in an object, at any depth (pod, pod template, CronJob...).
func containerImages(v any) []string {
	var out []string
	switch t := v.(type) {
	case map[string]any:
		for _, key := range slices.Sorted(maps.Keys(t)) {
			if key == "containers" || key == "initContainers" || key == "ephemeralContainers" {
				if list, ok := t[key].([]any); ok {
					for _, c := range list {
						if cm, ok := c.(map[string]any); ok {
							if img, ok := cm["image"].(string); ok {
								out = append(out, img)
							}
						}
					}
					continue
				}
			}
			out = append(out, containerImages(t[key])...)
		}
	case []any:
		for _, e := range t {
			out = append(out, containerImages(e)...)
		}
	}
	return out
}
