package deploy_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/arkadiuss/openfief/internal/release/overlay"
)

// TestRenderedImagesCannotRunByMistake renders every install kustomization
// as `kubectl apply -k` would and checks each container image: none may be
// pinned to an all-zero digest or run `latest` (named or implied), and an
// image not pinned by digest must be in the reserved .invalid domain, so
// applying deploy/ as committed pulls nothing. deploy/operator and
// deploy/egress-proxy name exactly the placeholders a release overlay
// replaces (overlay.Unpinned).
func TestRenderedImagesCannotRunByMistake(t *testing.T) {
	files, err := filepath.Glob("*/kustomization.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("kustomizations: %v, %v", files, err)
	}
	rendered := map[string][]string{}
	for _, f := range files {
		dir := filepath.Dir(f)
		imgs, err := overlay.RenderedImages(dir)
		if err != nil {
			t.Fatal(err)
		}
		rendered[dir] = imgs
		for _, img := range imgs {
			if err := checkImage(img); err != nil {
				t.Errorf("deploy/%s: %v", dir, err)
			}
		}
	}
	for dir, image := range map[string]string{"operator": "operator", "egress-proxy": "egress-proxy", "core": "openfief-core"} {
		imgs := rendered[dir]
		if len(imgs) != 1 || !strings.HasPrefix(imgs[0], overlay.Unpinned[image]+":") {
			t.Errorf("deploy/%s renders %v, want the placeholder %s that make release-overlay pins", dir, imgs, overlay.Unpinned[image])
		}
	}
}

func TestCheckImage(t *testing.T) {
	const hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	zero := strings.Repeat("0", 64)
	for img, ok := range map[string]bool{
		"ghcr.io/arkadiuss/openfief/operator@sha256:" + hex:                                true,
		"unpinned.invalid/openfief/operator:pin-by-digest-with-a-release-overlay":          true,
		"ghcr.io/arkadiuss/openfief/operator@sha256:" + zero:                               false,
		"ghcr.io/arkadiuss/openfief/operator:latest":                                       false,
		"ghcr.io/arkadiuss/openfief/operator":                                              false,
		"openfief-operator":                                                                false,
		"ghcr.io/arkadiuss/openfief/operator:v1.0.0":                                       false,
		"unpinned.invalid/openfief/operator":                                               false,
		"unpinned.invalid/openfief/operator:latest":                                        false,
		"ghcr.io/arkadiuss/openfief/operator:v1@sha256:" + zero:                            false,
		"ghcr.io/arkadiuss/openfief/operator:latest@sha256:" + hex:                         true,
		"localhost:5000/openfief/egress-proxy@sha256:" + strings.Repeat("f", 63) + "0":     true,
		"localhost:5000/openfief/egress-proxy@sha256:" + strings.Repeat("0", 63) + "0":     false,
		"localhost:5000/openfief/egress-proxy:pin-by-digest-with-a-release-overlay":        false,
		"unpinned.invalid:5000/openfief/egress-proxy:pin-by-digest-with-a-release-overlay": true,
	} {
		if err := checkImage(img); (err == nil) != ok {
			t.Errorf("checkImage(%s) = %v, want ok %v", img, err, ok)
		}
	}
}

// checkImage refuses an image that could run by mistake: an all-zero
// digest, `latest` named or implied, or a tag on a registry that resolves.
func checkImage(img string) error {
	ref, err := name.ParseReference(img, name.WeakValidation)
	if err != nil {
		return fmt.Errorf("image %q: %w", img, err)
	}
	switch r := ref.(type) {
	case name.Digest:
		if strings.Trim(strings.TrimPrefix(r.DigestStr(), "sha256:"), "0") == "" {
			return fmt.Errorf("image %s is pinned to an all-zero placeholder digest", img)
		}
		return nil
	case name.Tag:
		if r.TagStr() == name.DefaultTag {
			return fmt.Errorf("image %s runs latest (named or implied): pin it by digest", img)
		}
		host := r.RegistryStr()
		if h, _, ok := strings.Cut(host, ":"); ok {
			host = h
		}
		if !strings.HasSuffix(host, ".invalid") {
			return fmt.Errorf("image %s is a tag on a registry that resolves: pin it by digest", img)
		}
		return nil
	}
	return fmt.Errorf("image %s: unexpected reference %T", img, ref)
}
