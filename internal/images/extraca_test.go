//go:build heavy

package images

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestWithExtraCA adds a CA file to nbp-fx's index: every image keeps the
// system bundle and gains the file, the index stays valid and keeps its
// platforms, the same CA gives the same digest, and a name that is a path
// is refused.
func TestWithExtraCA(t *testing.T) {
	res := sharedBuild(t)
	b, _ := res.Get("nbp-fx")
	ca := []byte("-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n")
	idx, err := WithExtraCA(b.Index, "stand-in", ca)
	if err != nil {
		t.Fatal(err)
	}
	validateServed(t, idx)
	again, err := WithExtraCA(b.Index, "stand-in", ca)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := idx.Digest()
	d2, _ := again.Digest()
	if d1 != d2 || d1 == b.Digest {
		t.Errorf("digests %s and %s of the same CA (the original is %s)", d1, d2, b.Digest)
	}
	im, _ := idx.IndexManifest()
	old, _ := b.Index.IndexManifest()
	if len(im.Manifests) != len(old.Manifests) {
		t.Fatalf("%d images, want %d", len(im.Manifests), len(old.Manifests))
	}
	for i, d := range im.Manifests {
		if !d.Platform.Equals(*old.Manifests[i].Platform) {
			t.Errorf("image %d is for %v, want %v", i, d.Platform, old.Manifests[i].Platform)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		files := map[string][]byte{}
		tr := tar.NewReader(mutate.Extract(img))
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(tr)
			files[hdr.Name] = data
		}
		if !bytes.Equal(files["etc/ssl/certs/stand-in.pem"], ca) {
			t.Errorf("%s: etc/ssl/certs/stand-in.pem holds %q", d.Platform, files["etc/ssl/certs/stand-in.pem"])
		}
		if !bytes.Equal(files[CABundlePath[1:]], CABundle()) {
			t.Errorf("%s: the system bundle changed", d.Platform)
		}
	}
	for _, name := range []string{"", "../x", "a/b", "x.pem"} {
		if _, err := WithExtraCA(b.Index, name, ca); err == nil {
			t.Errorf("CA file name %q was accepted", name)
		}
	}
}
