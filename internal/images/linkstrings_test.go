//go:build heavy

package images

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/arkadiuss/openfief/internal/trust/catalog"
)

// TestLinkStrings builds the catalog's test program into an image with and
// without a release catalog set through Options.LinkStrings, as a release
// builds the operator (OF-30), and runs the binary each image holds.
func TestLinkStrings(t *testing.T) {
	src := testSource(t)
	show := Spec{Name: "show", Package: "./internal/trust/catalog/testdata/show", Licenses: LicenseCore}
	file := []byte(`{"plugins": []}` + "\n")
	run := func(link map[string]map[string]string) (string, v1.Hash) {
		t.Helper()
		res, err := Build(context.Background(), Options{Source: src, Specs: []Spec{show}, Platforms: []v1.Platform{testPlatform()}, LinkStrings: link})
		if err != nil {
			t.Fatal(err)
		}
		img := res.Images[0].Images[0]
		bin := filepath.Join(t.TempDir(), "show")
		if err := os.WriteFile(bin, extract(t, img.Image, src.Epoch)["/show"].data, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", bin, err, out)
		}
		return strings.TrimSpace(string(out)), img.Digest
	}
	plain, plainDigest := run(nil)
	if plain != "entries=0 released=false" {
		t.Errorf("without link strings the binary printed %q", plain)
	}
	linked, linkedDigest := run(map[string]map[string]string{"show": {catalog.Symbol: catalog.Encode(file)}})
	if linked != "entries=0 released=true" {
		t.Errorf("with the release catalog linked in the binary printed %q", linked)
	}
	if plainDigest == linkedDigest {
		t.Error("the image with a linked-in catalog has the same digest as the one without")
	}

	for _, bad := range []map[string]map[string]string{
		{"show": {catalog.Symbol: "a b"}},
		{"show": {catalog.Symbol: `a"b`}},
		{"show": {"pkg.var=x": "y"}},
		{"operator": {catalog.Symbol: "x"}},
	} {
		if _, err := Build(context.Background(), Options{Source: src, Specs: []Spec{show}, Platforms: []v1.Platform{testPlatform()}, LinkStrings: bad}); err == nil {
			t.Errorf("link strings %v: built, want refused", bad)
		}
	}

	cache := t.TempDir()
	opts := Options{Source: src, Specs: []Spec{show}, Platforms: []v1.Platform{testPlatform()}, LinkStrings: map[string]map[string]string{"show": {catalog.Symbol: catalog.Encode(file)}}}
	for range 2 {
		if _, reused, err := Cached(context.Background(), cache, opts); err != nil || reused {
			t.Fatalf("Cached with link strings: reused %t, %v; want a fresh build each time", reused, err)
		}
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Errorf("Cached stored a build with link strings: %v", entries)
	}
}
