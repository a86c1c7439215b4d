package overlay

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestReleaseOverlay writes an overlay for the platform's digests and the
// check probe's and renders it: the operator, the proxy and the core run
// exactly theirs, the probe is named only in the ConfigMap openfief-release
// under its fixed name, and nothing unresolvable is left.
func TestReleaseOverlay(t *testing.T) {
	root, err := images.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]plugins.ImageRef{}
	for i, n := range []string{"operator", "egress-proxy", "openfief-core", CheckProbe} {
		ref, err := plugins.ParseImageRef("registry.example.com:5000/openfief/" + n + "@sha256:" + strings.Repeat(string(rune('a'+i)), 64))
		if err != nil {
			t.Fatal(err)
		}
		refs[n] = ref
	}
	out := filepath.Join(t.TempDir(), "release")
	if err := WriteRelease(out, filepath.Join(root, "deploy"), refs, "a test overlay\nsecond line"); err != nil {
		t.Fatal(err)
	}
	got, err := RenderedImages(out)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := []string{refs["egress-proxy"].String(), refs["openfief-core"].String(), refs["operator"].String()}
	if !slices.Equal(got, want) {
		t.Errorf("overlay renders %v, want %v", got, want)
	}
	raw, err := os.ReadFile(filepath.Join(out, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"# a test overlay\n# second line\n", "name: " + Unpinned["operator"], "newName: registry.example.com:5000/openfief/operator", "digest: sha256:aaaa",
		"configMapGenerator:\n- namespace: openfief\n  name: openfief-release\n  literals:\n  - check-probe=registry.example.com:5000/openfief/check-probe@sha256:dddd",
		"  options:\n    disableNameSuffixHash: true\n",
	} {
		if !strings.Contains(string(raw), s) {
			t.Errorf("kustomization.yaml lacks %q:\n%s", s, raw)
		}
	}

	delete(refs, "egress-proxy")
	if err := WriteRelease(out, filepath.Join(root, "deploy"), refs, ""); err == nil {
		t.Error("an overlay without the proxy's digest was written")
	}
}
