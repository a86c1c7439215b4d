package cosigntest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// The media types of cosign's legacy signature format.
const (
	// SimpleSigningMediaType is the media type of a legacy signature's
	// layer: the simple-signing payload cosign signs.
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// LegacySignatureArtifactType is the artifactType cosign gives a legacy
	// signature it attaches as a referrer (its experimental OCI 1.1 mode).
	LegacySignatureArtifactType = "application/vnd.dev.cosign.artifact.sig.v1+json"
	legacySignatureAnnotation   = "dev.cosignproject.cosign/signature"
)

// LegacySignatureImage builds what `cosign sign --key --new-bundle-format=false
// --tlog-upload=false` pushes for ref: an OCI image manifest with an empty
// config and one layer, the simple-signing payload naming ref's repository
// and digest, signed with a fresh ECDSA P-256 key, the signature in the
// layer's annotation.
func LegacySignatureImage(t testing.TB, ref plugins.ImageRef) v1.Image {
	t.Helper()
	payload, err := json.Marshal(map[string]any{
		"critical": map[string]any{
			"identity": map[string]string{"docker-reference": ref.Name()},
			"image":    map[string]string{"docker-manifest-digest": ref.Digest()},
			"type":     "cosign container image signature",
		},
		"optional": nil,
	})
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(payload)
	sig, err := ecdsa.SignASN1(rand.Reader, key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:       static.NewLayer(payload, SimpleSigningMediaType),
		Annotations: map[string]string{legacySignatureAnnotation: base64.StdEncoding.EncodeToString(sig)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// SignLegacy signs ref's digest in cosign's legacy format and pushes the
// signature under the tag sha256-<hex>.sig, as `cosign sign
// --new-bundle-format=false` does. It returns the signature manifest's digest.
func (r *Registry) SignLegacy(t testing.TB, ref plugins.ImageRef) v1.Hash {
	t.Helper()
	img := LegacySignatureImage(t, ref)
	d := digestRef(t, ref)
	tag := d.Context().Tag(strings.Replace(ref.Digest(), ":", "-", 1) + ".sig")
	if err := remote.Write(tag, img); err != nil {
		t.Fatalf("push legacy signature: %v", err)
	}
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
