package images

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestReleaseOverlay writes an overlay for two digests and renders it: the
// operator and the proxy run exactly those, and nothing unresolvable is left.
func TestReleaseOverlay(t *testing.T) {
	root, err := FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]plugins.ImageRef{}
	for i, n := range []string{"operator", "egress-proxy", "openfief-core"} {
		ref, err := plugins.ParseImageRef("registry.example.com:5000/openfief/" + n + "@sha256:" + strings.Repeat(string(rune('a'+i)), 64))
		if err != nil {
			t.Fatal(err)
		}
		refs[n] = ref
	}
	out := filepath.Join(t.TempDir(), "release")
	if err := WriteReleaseOverlay(out, filepath.Join(root, "deploy"), refs, "a test overlay\nsecond line"); err != nil {
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
	for _, s := range []string{"# a test overlay\n# second line\n", "name: " + Unpinned["operator"], "newName: registry.example.com:5000/openfief/operator", "digest: sha256:aaaa"} {
		if !strings.Contains(string(raw), s) {
			t.Errorf("kustomization.yaml lacks %q:\n%s", s, raw)
		}
	}

	delete(refs, "egress-proxy")
	if err := WriteReleaseOverlay(out, filepath.Join(root, "deploy"), refs, ""); err == nil {
		t.Error("an overlay without the proxy's digest was written")
	}
}
