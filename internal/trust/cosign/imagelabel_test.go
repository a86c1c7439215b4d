package cosign

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestReadLabel reads a label from a real in-process registry: an image by
// digest and by tag, every platform image of an index, an image without the
// label, and the refusals of a missing image and a plain-HTTP registry that
// is neither loopback nor configured insecure.
func TestReadLabel(t *testing.T) {
	ctx := context.Background()
	reg := cosigntest.NewRegistry(t, true)
	v, err := NewVerifier(withRetryBackoff(remote.Backoff{Steps: 1}))
	if err != nil {
		t.Fatal(err)
	}
	const key = plugins.ManifestLabel

	single := reg.PushImage(t, "single", map[string]string{key: "one", "other": "x"})
	tag, err := name.NewTag(reg.Host+"/single:dev", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(mustDigest(t, single.String()))
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{single.String(), reg.Host + "/single:dev"} {
		d, got, err := v.ReadLabel(ctx, ref, key)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if d != single.String() || len(got) != 1 || got[0] != (ImageLabel{Digest: single.Digest(), Value: "one", Found: true}) {
			t.Errorf("%s: ReadLabel = %s %+v", ref, d, got)
		}
	}

	idx := reg.PushIndex(t, "multi", map[string]map[string]string{
		"linux/amd64": {key: "amd"},
		"linux/arm64": nil,
	})
	d, got, err := v.ReadLabel(ctx, idx.String(), key)
	if err != nil {
		t.Fatal(err)
	}
	if d != idx.String() || len(got) != 2 {
		t.Fatalf("index: ReadLabel = %s %+v, want 2 platform images (not the attestation)", d, got)
	}
	byPlatform := map[string]ImageLabel{}
	for _, l := range got {
		byPlatform[l.Platform] = l
	}
	if l := byPlatform["linux/amd64"]; !l.Found || l.Value != "amd" || l.Digest == "" {
		t.Errorf("linux/amd64: %+v", l)
	}
	if l := byPlatform["linux/arm64"]; l.Found {
		t.Errorf("linux/arm64 has no label, got %+v", l)
	}

	if _, _, err := v.ReadLabel(ctx, reg.Host+"/missing:latest", key); !errors.Is(err, plugins.ErrInvalidImage) {
		t.Errorf("a missing image: %v, want ErrInvalidImage", err)
	}
	if _, _, err := v.ReadLabel(ctx, "not a reference", key); !errors.Is(err, plugins.ErrInvalidImage) {
		t.Errorf("a bad reference: %v, want ErrInvalidImage", err)
	}
	// The same registry under a name that is not loopback: HTTPS is tried,
	// and plain HTTP never.
	alias := strings.Replace(reg.Host, "127.0.0.1", "registry.invalid", 1)
	if _, _, err := v.ReadLabel(ctx, alias+"/single:dev", key); err == nil || !errors.Is(err, ErrRegistryUnavailable) {
		t.Errorf("a non-loopback registry: %v, want it unavailable over HTTPS", err)
	}
}

// TestReadLabelCapsAnswers: a registry that answers a manifest larger than
// MaxResponseBytes is refused, not read.
func TestReadLabelCapsAnswers(t *testing.T) {
	reg := cosigntest.NewRegistry(t, true)
	reg.Gate(func(w http.ResponseWriter, req *http.Request) bool {
		if !strings.Contains(req.URL.Path, "/manifests/") {
			return false
		}
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		_, _ = w.Write([]byte(strings.Repeat(" ", MaxResponseBytes+10)))
		return true
	})
	v, err := NewVerifier(withRetryBackoff(remote.Backoff{Steps: 1}))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = v.ReadLabel(context.Background(), reg.Host+"/big:latest", plugins.ManifestLabel)
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("an oversized manifest: %v", err)
	}
}

func mustDigest(t *testing.T, s string) name.Digest {
	t.Helper()
	d, err := name.NewDigest(s, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
