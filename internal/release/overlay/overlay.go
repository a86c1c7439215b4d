// Package overlay writes the kustomize overlays a release installs from
// (docs/images.md, Releases): deploy/'s install kustomizations with their
// images pinned by digest, and the whole platform's with its version label,
// the check probe's ConfigMap and the options `openfief platform install`
// takes. hack/release overlay, internal/release, the local platform and the
// tests write them here.
package overlay

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/resid"
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

// WriteRelease writes outDir/kustomization.yaml: deploy/operator,
// deploy/egress-proxy and deploy/core (under deployDir) with their images set to refs, by
// image name (and the check probe, when refs has it, as the operator's
// isolation gate), as `kustomize edit set image <unpinned>=<repo>@sha256:<hex>`
// would. It then renders the overlay with the kustomize API and checks that
// every container runs exactly one of refs, so a mismatch of names fails
// here and not in a cluster. header is written as comment lines on top.
func WriteRelease(outDir, deployDir string, refs map[string]plugins.ImageRef, header string) error {
	return writeOverlay(outDir, deployDir, Platform{Refs: refs, Header: header}, false)
}

// Platform is what a whole-platform overlay pins and sets
// (WritePlatform, `openfief platform install --overlay`).
type Platform struct {
	// Refs are the operator, egress-proxy and openfief-core images by name,
	// and optionally CheckProbe's, which the overlay writes into the
	// ConfigMap deploy.ReleaseConfigMap (OF-29).
	Refs map[string]plugins.ImageRef
	// Version is the label app.kubernetes.io/version on every object (not
	// on pod templates): what `openfief platform upgrade` compares to refuse
	// a downgrade. Required.
	Version string
	// APIServerCIDRs, when set, replace the API server placeholder of the
	// core's NetworkPolicy (deploy.APIServerPlaceholder); empty leaves it
	// for the installer to fill from the cluster.
	APIServerCIDRs []string
	// RegistryConfig adds deploy/operator/components/registry-config: the
	// operator reads pull credentials from the Secret
	// openfief-registry-config, which must exist before its pod can start.
	RegistryConfig bool
	// Header is written as comment lines on top.
	Header string
}

// WritePlatform writes outDir/kustomization.yaml for the whole
// platform: deploy/crds, deploy/admission, deploy/core, deploy/egress-proxy
// and deploy/operator (under deployDir), images pinned as
// WriteRelease pins them, the ConfigMap deploy.ReleaseConfigMap
// naming the check probe when r.Refs has it, every object labelled with
// r.Version, the registry-config component and the API server's addresses
// when r asks for them. It checks the result by rendering it, like WriteRelease.
func WritePlatform(outDir, deployDir string, r Platform) error {
	if r.Version == "" {
		return fmt.Errorf("a platform overlay needs a version")
	}
	if errs := validation.IsValidLabelValue(r.Version); len(errs) > 0 {
		return fmt.Errorf("version %q cannot be a label value: %s", r.Version, strings.Join(errs, "; "))
	}
	return writeOverlay(outDir, deployDir, r, true)
}

// platformBases are the kustomizations a platform overlay adds to the
// release bases, in the order it lists them.
var platformBases = []string{"crds", "admission"}

// writeOverlay writes and checks the overlay of r; platform adds
// deploy/crds, deploy/admission, the version label, the component and the
// API server patch.
func writeOverlay(outDir, deployDir string, r Platform, platform bool) error {
	absOut, err := filepath.Abs(outDir)
	if err != nil {
		return err
	}
	absDeploy, err := filepath.Abs(deployDir)
	if err != nil {
		return err
	}
	rel := func(dir string) (string, error) {
		p, err := filepath.Rel(absOut, filepath.Join(absDeploy, dir))
		return filepath.ToSlash(p), err
	}
	k := types.Kustomization{TypeMeta: types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind}}
	if platform {
		for _, dir := range platformBases {
			p, err := rel(dir)
			if err != nil {
				return err
			}
			k.Resources = append(k.Resources, p)
		}
	}
	names := slices.Sorted(maps.Keys(releaseBases))
	want := map[string]bool{}
	for _, image := range names {
		ref, ok := r.Refs[image]
		if !ok {
			return fmt.Errorf("no digest for the %s image", image)
		}
		p, err := rel(releaseBases[image])
		if err != nil {
			return err
		}
		k.Resources = append(k.Resources, p)
		k.Images = append(k.Images, types.Image{Name: Unpinned[image], NewName: ref.Name(), Digest: ref.Digest()})
		want[ref.String()] = true
	}
	if probe, ok := r.Refs[CheckProbe]; ok {
		k.Patches = append(k.Patches, gatePatch(probe))
	}
	if cm, err := releaseConfigMap(r); err != nil {
		return err
	} else if len(cm.LiteralSources) > 0 {
		k.ConfigMapGenerator = append(k.ConfigMapGenerator, cm)
	}
	if platform {
		k.Labels = []types.Label{{Pairs: map[string]string{versionLabel: r.Version}}}
		if r.RegistryConfig {
			p, err := rel("operator/components/registry-config")
			if err != nil {
				return err
			}
			k.Components = append(k.Components, p)
		}
		if len(r.APIServerCIDRs) > 0 {
			patch, err := deploy.APIServerPatch(r.APIServerCIDRs)
			if err != nil {
				return err
			}
			k.Patches = append(k.Patches, types.Patch{
				Target: &types.Selector{ResId: resid.ResId{Gvk: resid.Gvk{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}, Name: deploy.CoreNetworkPolicy}},
				Patch:  patch,
			})
		}
	}
	raw, err := kyaml.Marshal(k)
	if err != nil {
		return err
	}
	var b strings.Builder
	for line := range strings.Lines(strings.TrimSpace(r.Header)) {
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

// CheckProbe is the image an overlay's Platform.Refs may name besides
// the platform's: the check probe (OF-29), which no Deployment runs; the
// overlay names it in the ConfigMap deploy.ReleaseConfigMap, and passes it
// to the operator as every plugin pod's isolation gate (gatePatch, OF-42).
const CheckProbe = "check-probe"

// operatorDeployment is the operator's Deployment in deploy/operator.
const operatorDeployment = "openfief-operator"

// gatePatch adds --isolation-gate-image=<probe> to the operator's
// arguments: the operator refuses to start without a gate image (OF-42), so
// an overlay that pins no check probe installs an operator that says so.
func gatePatch(probe plugins.ImageRef) types.Patch {
	op, _ := json.Marshal([]map[string]string{{
		"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--isolation-gate-image=" + probe.String(),
	}})
	return types.Patch{
		Target: &types.Selector{ResId: resid.ResId{Gvk: resid.Gvk{Group: "apps", Version: "v1", Kind: "Deployment"}, Name: operatorDeployment}},
		Patch:  string(op),
	}
}

// releaseConfigMap generates deploy.ReleaseConfigMap in the openfief
// namespace with the check probe's reference, when r has it, under a fixed
// name (no hash suffix). It says what the release built; nothing trusts
// it.
func releaseConfigMap(r Platform) (types.ConfigMapArgs, error) {
	var literals []string
	if probe, ok := r.Refs[CheckProbe]; ok {
		literals = append(literals, deploy.ReleaseKeyCheckProbe+"="+probe.String())
	}
	return types.ConfigMapArgs{GeneratorArgs: types.GeneratorArgs{
		Namespace:     plugins.Namespace,
		Name:          deploy.ReleaseConfigMap,
		KvPairSources: types.KvPairSources{LiteralSources: literals},
		Options:       &types.GeneratorOptions{DisableNameSuffixHash: true},
	}}, nil
}

// versionLabel carries a platform overlay's version on every object.
const versionLabel = "app.kubernetes.io/version"

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
