//go:build heavy

package images

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestReproducible builds every image a second time from the same source
// and expects the same digests, down to each platform image; the layout
// Write stores reads back with the same digests and validates.
func TestReproducible(t *testing.T) {
	first := sharedBuild(t)
	second, err := build(context.Background(), t)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range first.Images {
		b := second.Images[i]
		if a.Digest != b.Digest {
			t.Errorf("%s: index %s, then %s", a.Spec.Name, a.Digest, b.Digest)
		}
		for j := range a.Images {
			if a.Images[j].Digest != b.Images[j].Digest {
				t.Errorf("%s %s: %s, then %s", a.Spec.Name, a.Images[j].Platform, a.Images[j].Digest, b.Images[j].Digest)
			}
		}
	}

	dir := t.TempDir() + "/build"
	if err := Write(dir, second); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(dir, second.Source.Root)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range loaded.Images {
		if b.Digest != first.Images[i].Digest || b.Spec.Name != first.Images[i].Spec.Name {
			t.Errorf("layout holds %s %s, built %s", b.Spec.Name, b.Digest, first.Images[i].Digest)
		}
		if err := validate.Index(b.Index); err != nil {
			t.Errorf("%s in the layout: %v", b.Spec.Name, err)
		}
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range tm.Manifests {
		names = append(names, d.Annotations[RefNameAnnotation])
	}
	if !slices.Equal(names, []string{"operator", "egress-proxy", "openfief-core", "nbp-fx", "ibkr-flex", "webdav-csv", "check-probe"}) {
		t.Errorf("layout names %v", names)
	}
}

// TestEpochChangesDigests: the stamps are inputs, so another
// SOURCE_DATE_EPOCH gives other digests (and the same one the same).
func TestEpochChangesDigests(t *testing.T) {
	src := testSource(t)
	specs, _ := SelectSpecs("egress-proxy")
	opts := Options{Source: src, Specs: specs, Platforms: []v1.Platform{testPlatform()}}
	a, err := Build(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Source.Epoch = src.Epoch.Add(time.Second)
	b, err := Build(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if a.Images[0].Digest == b.Images[0].Digest {
		t.Error("a different SOURCE_DATE_EPOCH gave the same digest")
	}
	if shared := sharedBuild(t); shared.Images[1].Digest != a.Images[0].Digest {
		t.Errorf("egress-proxy alone %s, with the others %s", a.Images[0].Digest, shared.Images[1].Digest)
	}
}

// TestCached builds into an empty cache, then reuses the entry.
func TestCached(t *testing.T) {
	src := testSource(t)
	specs, _ := SelectSpecs("nbp-fx")
	cache := t.TempDir()
	opts := Options{Source: src, Specs: specs, Platforms: []v1.Platform{testPlatform()}}
	first, reused, err := Cached(context.Background(), cache, opts)
	if err != nil || reused {
		t.Fatalf("first: reused %v, %v", reused, err)
	}
	second, reused, err := Cached(context.Background(), cache, opts)
	if err != nil || !reused {
		t.Fatalf("second: reused %v, %v", reused, err)
	}
	if first.Images[0].Digest != second.Images[0].Digest || len(second.Images) != 1 {
		t.Errorf("cached %v, built %v", second.Images, first.Images)
	}
	// An entry without the asked-for image is not reused, nor replaced.
	other, _ := SelectSpecs("ibkr-flex")
	opts.Specs = other
	if _, reused, err := Cached(context.Background(), cache, opts); err != nil || reused {
		t.Fatalf("ibkr-flex: reused %v, %v", reused, err)
	}
	if again, err := Load(cache+"/"+src.Key(), src.Root); err != nil || len(again.Images) != 1 || again.Images[0].Spec.Name != "nbp-fx" {
		t.Errorf("the entry was replaced: %v", err)
	}
	// A build holding the entry's image and more replaces it, and is
	// reused for either afterwards.
	both, _ := SelectSpecs("nbp-fx", "ibkr-flex")
	opts.Specs = both
	if _, reused, err := Cached(context.Background(), cache, opts); err != nil || reused {
		t.Fatalf("nbp-fx and ibkr-flex: reused %v, %v", reused, err)
	}
	for _, s := range [][]Spec{both, specs, other} {
		opts.Specs = s
		if _, reused, err := Cached(context.Background(), cache, opts); err != nil || !reused {
			t.Errorf("%d images after the wider build: reused %v, %v", len(s), reused, err)
		}
	}
	// The same tree as another version is another image in an entry of its
	// own: building it neither reuses nor replaces the first.
	opts.Specs = specs
	opts.Source.Version = "v9.9.9"
	next, reused, err := Cached(context.Background(), cache, opts)
	if err != nil || reused {
		t.Fatalf("v9.9.9: reused %v, %v", reused, err)
	}
	if next.Images[0].Digest == first.Images[0].Digest || opts.Source.Key() == src.Key() {
		t.Errorf("v9.9.9 built %s under key %s, the same as the first build", next.Images[0].Digest, opts.Source.Key())
	}
	if _, reused, err := Cached(context.Background(), cache, Options{Source: src, Specs: specs, Platforms: opts.Platforms}); err != nil || !reused {
		t.Errorf("the first version after v9.9.9: reused %v, %v", reused, err)
	}
}

// TestWithManifestLabel: the same program under another label is another
// image with the same layers and annotations.
func TestWithManifestLabel(t *testing.T) {
	res := sharedBuild(t)
	b, _ := res.Get("nbp-fx")
	cf, err := b.Images[0].Image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	m, err := plugins.ParseManifestLabel(cf.Config.Labels[plugins.ManifestLabel])
	if err != nil {
		t.Fatal(err)
	}
	m.Egress = append(m.Egress, "static.nbp.pl")
	raw, _ := json.Marshal(m)
	idx, err := WithManifestLabel(b.Index, string(raw))
	if err != nil {
		t.Fatal(err)
	}
	validateServed(t, idx)
	d, _ := idx.Digest()
	if d == b.Digest {
		t.Fatal("relabelled index has the same digest")
	}
	im, _ := idx.IndexManifest()
	old, _ := b.Index.IndexManifest()
	if im.Annotations[AnnotationRevision] != old.Annotations[AnnotationRevision] || !im.Manifests[0].Platform.Equals(*old.Manifests[0].Platform) {
		t.Errorf("index annotations %v, platform %v", im.Annotations, im.Manifests[0].Platform)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	ncf, _ := img.ConfigFile()
	if ncf.Config.Labels[plugins.ManifestLabel] != string(raw) || ncf.Config.Labels[AnnotationVersion] != cf.Config.Labels[AnnotationVersion] {
		t.Errorf("labels %v", ncf.Config.Labels)
	}
	nm, _ := img.Manifest()
	om, _ := b.Images[0].Image.Manifest()
	if len(nm.Layers) != len(om.Layers) || nm.Layers[len(nm.Layers)-1].Digest != om.Layers[len(om.Layers)-1].Digest || nm.Annotations[AnnotationSource] != SourceURL {
		t.Error("the relabelled image does not share the program's layer and annotations")
	}
	if _, err := WithManifestLabel(b.Index, `{"capabilities":["connector"],"egress":["*.nbp.pl"]}`); err == nil {
		t.Error("an invalid label was accepted")
	}
}

func mustDigest(t *testing.T, ref string) name.Digest {
	t.Helper()
	d, err := name.NewDigest(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// validateServed pushes idx to a registry and validates the index it
// serves: in memory, validate trips over nil and empty layer annotations
// that serialise the same.
func validateServed(t *testing.T, idx v1.ImageIndex) {
	t.Helper()
	ref, err := PushIndex(context.Background(), newRegistry(t)+"/openfief/nbp-fx", idx, PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Index(mustDigest(t, ref.String()))
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(pulled); err != nil {
		t.Fatal(err)
	}
}
