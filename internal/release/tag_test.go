package release

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestTagImages pushes two indexes by digest only, as the release workflow
// does, writes their images.json and tags them: each tag names its digest,
// a second run changes nothing, and a version tag already naming another
// digest is refused, not moved.
func TestTagImages(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()

	var entries []imageEntry
	digests := map[string]string{}
	for _, n := range []string{"nbp-fx", "operator"} {
		idx, err := random.Index(64, 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		ref, err := name.NewDigest(host + "/rel/openfief/" + n + "@" + d.String())
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.WriteIndex(ref, idx); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, imageEntry{Name: n, Ref: ref.String(), SBOM: "sha256:" + strings.Repeat("a", 64)})
		digests[n] = d.String()
	}
	dir := t.TempDir()
	raw, err := json.Marshal(map[string]any{"images": entries})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ImagesFile), raw, 0o644); err != nil {
		t.Fatal(err)
	}

	const version = "v1.2.0"
	for range 2 {
		tagged, err := TagImages(ctx, dir, version, false, nil)
		if err != nil || len(tagged) != 2 {
			t.Fatalf("tagged %v: %v", tagged, err)
		}
		for n, d := range digests {
			desc, err := remote.Head(mustTag(t, host+"/rel/openfief/"+n+":"+version))
			if err != nil || desc.Digest.String() != d {
				t.Errorf("%s:%s: %v, %v; want %s", n, version, desc, err, d)
			}
		}
	}

	// The operator's version tag moved elsewhere by someone else: refused.
	other, err := random.Index(64, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(mustTag(t, host+"/rel/openfief/operator:v1.3.0"), other); err != nil {
		t.Fatal(err)
	}
	if _, err := TagImages(ctx, dir, "v1.3.0", false, nil); err == nil || !strings.Contains(err.Error(), "refusing to move a version tag") {
		t.Errorf("tagging over another digest: %v, want a refusal", err)
	}
	if _, err := TagImages(ctx, dir, "1.3.0", false, nil); err == nil || !strings.Contains(err.Error(), "version") {
		t.Errorf("a version without v: %v", err)
	}
}

func mustTag(t *testing.T, s string) name.Tag {
	t.Helper()
	tag, err := name.NewTag(s)
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

// TestParseImagesFileRefuses: what is not a release's images.json.
func TestParseImagesFileRefuses(t *testing.T) {
	ok := `{"name":"nbp-fx","ref":"r.example/openfief/nbp-fx@sha256:` + strings.Repeat("1", 64) + `"}`
	if refs, err := ParseImagesFile([]byte(`{"images":[` + ok + `]}`)); err != nil || len(refs) != 1 {
		t.Fatalf("a good file: %v, %v", refs, err)
	}
	for name, raw := range map[string]string{
		"empty":             `{}`,
		"unknown field":     `{"images":[` + ok + `],"x":1}`,
		"twice":             `{"images":[` + ok + `,` + ok + `]}`,
		"by tag":            `{"images":[{"name":"nbp-fx","ref":"r.example/openfief/nbp-fx:v1"}]}`,
		"another repo":      `{"images":[{"name":"nbp-fx","ref":"r.example/evil/x@sha256:` + strings.Repeat("1", 64) + `"}]}`,
		"a name with slash": `{"images":[{"name":"a/nbp-fx","ref":"r.example/openfief/a/nbp-fx@sha256:` + strings.Repeat("1", 64) + `"}]}`,
		"trailing data":     `{"images":[` + ok + `]}{}`,
	} {
		if _, err := ParseImagesFile([]byte(raw)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzParseImagesFile(f *testing.F) {
	f.Add([]byte(`{"images":[{"name":"nbp-fx","ref":"r.example/openfief/nbp-fx@sha256:` + strings.Repeat("1", 64) + `"}]}`))
	f.Add([]byte(`{"images":null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		refs, err := ParseImagesFile(raw)
		if err != nil {
			return
		}
		for _, r := range refs {
			if r.Digest() == "" {
				t.Fatalf("a reference without digest: %v", r)
			}
		}
	})
}
