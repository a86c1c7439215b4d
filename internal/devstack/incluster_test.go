package devstack

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/release/overlay"
)

// TestWriteDevOverlay writes the in-cluster mode's overlay over a release
// overlay of this tree and renders both with kustomize: the operator reads
// both registries over plain HTTP and mounts the registry config (the
// component, named by an absolute path), the core syncs every interval
// given, after deploy/core's own flag, the release's ConfigMap names the
// check probe; with nothing to add the overlay is the release.
func TestWriteDevOverlay(t *testing.T) {
	root, err := images.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]plugins.ImageRef{}
	for i, n := range PlatformImages {
		if refs[n], err = plugins.ParseImageRef("10.244.0.1:5000/openfief/" + n + "@sha256:" + strings.Repeat(string(rune('a'+i)), 64)); err != nil {
			t.Fatal(err)
		}
	}
	if refs[overlay.CheckProbe], err = plugins.ParseImageRef("10.244.0.1:5001/" + CheckProbeRepository + "@sha256:" + strings.Repeat("d", 64)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := overlay.WritePlatform(filepath.Join(dir, "release"), filepath.Join(root, "deploy"), overlay.Platform{Refs: refs, Version: "v0.1.0"}); err != nil {
		t.Fatal(err)
	}
	if err := WriteDevOverlay(filepath.Join(dir, "overlay"), "../release", DevOverlay{
		Components:         []string{filepath.Join(root, "deploy", "operator", "components", "registry-config")},
		InsecureRegistries: []string{"10.244.0.1:5000", "10.244.0.1:5001"},
		SyncInterval:       5 * time.Second,
	}); err != nil {
		t.Fatal(err)
	}
	args := renderedArgs(t, filepath.Join(dir, "overlay"))
	for _, want := range []string{"--insecure-registry=10.244.0.1:5000", "--insecure-registry=10.244.0.1:5001", "--registry-config=/etc/openfief/registry/config.json"} {
		if !slices.Contains(args["openfief-operator"], want) {
			t.Errorf("the operator's args %q lack %s", args["openfief-operator"], want)
		}
	}
	if got := releaseData(t, filepath.Join(dir, "overlay")); got != refs[overlay.CheckProbe].String() {
		t.Errorf("the overlay's ConfigMap %s names the check probe %q, want %s", deploy.ReleaseConfigMap, got, refs[overlay.CheckProbe])
	}
	core := args["openfief-core"]
	if i, j := slices.Index(core, "--sync-interval=1h"), slices.Index(core, "--sync-interval=5s"); i < 0 || j < i {
		t.Errorf("the core's args %q: want --sync-interval=5s after deploy/core's --sync-interval=1h", core)
	}

	if err := WriteDevOverlay(filepath.Join(dir, "plain"), "../release", DevOverlay{}); err != nil {
		t.Fatal(err)
	}
	plain, release := renderedArgs(t, filepath.Join(dir, "plain")), renderedArgs(t, filepath.Join(dir, "release"))
	for name, a := range release {
		if !slices.Equal(plain[name], a) {
			t.Errorf("%s: an overlay adding nothing renders args %q, the release %q", name, plain[name], a)
		}
	}
}

// renderedArgs renders the kustomization in dir and returns the first
// container's args of each Deployment, by name.
func renderedArgs(t *testing.T, dir string) map[string][]string {
	t.Helper()
	objs, err := deploy.Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		if len(containers) == 0 {
			continue
		}
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		out[u.GetName()] = args
	}
	return out
}

// releaseData renders the kustomization in dir and returns the check
// probe named in its ConfigMap openfief-release.
func releaseData(t *testing.T, dir string) string {
	t.Helper()
	objs, err := deploy.Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if u.GetKind() == "ConfigMap" && u.GetNamespace() == plugins.Namespace && u.GetName() == deploy.ReleaseConfigMap {
			probe, _, _ := unstructured.NestedString(u.Object, "data", deploy.ReleaseKeyCheckProbe)
			return probe
		}
	}
	return ""
}
