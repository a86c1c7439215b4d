package images

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// RefNameAnnotation names an index in the layout's index.json, so tools
// read it as oci:<dir>:<name> (skopeo, crane).
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// recordFile sits beside the layout: what was built, with what, and the
// digests, for people and for the cache check.
const recordFile = "build.json"

// record is build.json.
type record struct {
	Commit    string        `json:"commit"`
	Dirty     string        `json:"dirty,omitempty"`
	Version   string        `json:"version"`
	Epoch     int64         `json:"sourceDateEpoch"`
	GoVersion string        `json:"goVersion"`
	Platforms []string      `json:"platforms"`
	Images    []recordImage `json:"images"`
}

type recordImage struct {
	Name      string           `json:"name"`
	Index     string           `json:"index"`
	Platforms []recordPlatform `json:"platforms"`
}

type recordPlatform struct {
	Platform string `json:"platform"`
	Digest   string `json:"digest"`
	Size     int64  `json:"size"`
}

func newRecord(res *Result) record {
	r := record{
		Commit: res.Source.Commit, Dirty: res.Source.Dirty, Version: res.Source.Version,
		Epoch: res.Source.Epoch.Unix(), GoVersion: res.GoVersion,
	}
	for _, p := range res.Platforms {
		r.Platforms = append(r.Platforms, p.String())
	}
	for _, b := range res.Images {
		ri := recordImage{Name: b.Spec.Name, Index: b.Digest.String()}
		for _, pi := range b.Images {
			ri.Platforms = append(ri.Platforms, recordPlatform{Platform: pi.Platform.String(), Digest: pi.Digest.String(), Size: pi.Size})
		}
		r.Images = append(r.Images, ri)
	}
	return r
}

// CacheDir is where a source tree keeps its builds: <root>/.cache/images,
// which git ignores. Each build is a directory named by Source.Key.
func CacheDir(root string) string { return filepath.Join(root, ".cache", "images") }

// Write stores res in dir as an OCI image layout (one index per image,
// named by RefNameAnnotation) with build.json beside it. The layout is
// written next to dir and renamed into place, so a reader never sees half
// of one; an existing dir is replaced.
func Write(dir string, res *Result) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	for _, b := range res.Images {
		if err := p.AppendIndex(b.Index, layout.WithAnnotations(map[string]string{RefNameAnnotation: b.Spec.Name})); err != nil {
			return fmt.Errorf("write %s: %w", b.Spec.Name, err)
		}
	}
	if err := writeRecord(tmp, newRecord(res)); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	old := ""
	if _, err := os.Stat(dir); err == nil {
		if old, err = os.MkdirTemp(parent, ".old-"); err != nil {
			return err
		}
		if err := os.Rename(dir, filepath.Join(old, "x")); err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(old) }()
	}
	return os.Rename(tmp, dir)
}

func writeRecord(dir string, r record) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, recordFile), append(raw, '\n'), 0o644)
}

func readRecord(dir string) (record, error) {
	var r record
	raw, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("%s: %w", filepath.Join(dir, recordFile), err)
	}
	return r, nil
}

// Load reads a build that Write stored in dir; the images' blobs are read
// from dir when used. root is the source tree (Result.Source.Root).
func Load(dir, root string) (*Result, error) {
	r, err := readRecord(dir)
	if err != nil {
		return nil, err
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	tm, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	res := &Result{
		Source:    Source{Root: root, Commit: r.Commit, Dirty: r.Dirty, Version: r.Version, Epoch: time.Unix(r.Epoch, 0).UTC()},
		GoVersion: r.GoVersion,
	}
	for _, s := range r.Platforms {
		pl, err := ParsePlatform(s)
		if err != nil {
			return nil, err
		}
		res.Platforms = append(res.Platforms, pl)
	}
	for _, ri := range r.Images {
		specs, err := SelectSpecs(ri.Name)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(tm.Manifests, func(d v1.Descriptor) bool { return d.Annotations[RefNameAnnotation] == ri.Name })
		if i < 0 {
			return nil, fmt.Errorf("%s: no index named %s", dir, ri.Name)
		}
		idx, err := top.ImageIndex(tm.Manifests[i].Digest)
		if err != nil {
			return nil, err
		}
		b := Built{Spec: specs[0], Index: idx, Digest: tm.Manifests[i].Digest}
		if b.Digest.String() != ri.Index {
			return nil, fmt.Errorf("%s: %s is %s in the layout and %s in %s", dir, ri.Name, b.Digest, ri.Index, recordFile)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return nil, err
		}
		for _, d := range im.Manifests {
			img, err := idx.Image(d.Digest)
			if err != nil {
				return nil, err
			}
			if d.Platform == nil {
				return nil, fmt.Errorf("%s: an image of %s names no platform", dir, ri.Name)
			}
			pi, err := Describe(*d.Platform, img)
			if err != nil {
				return nil, err
			}
			b.Images = append(b.Images, pi)
		}
		res.Images = append(res.Images, b)
	}
	return res, nil
}

// covers reports whether res holds every image of specs for every platform,
// built by goVersion from src.
func (r *Result) covers(src Source, goVersion string, specs []Spec, platforms []v1.Platform) bool {
	if r.GoVersion != goVersion || r.Source.Commit != src.Commit || r.Source.Dirty != src.Dirty ||
		r.Source.Version != src.Version || !r.Source.Epoch.Equal(src.Epoch) {
		return false
	}
	for _, p := range platforms {
		if !slices.ContainsFunc(r.Platforms, func(q v1.Platform) bool { return q.Equals(p) }) {
			return false
		}
	}
	for _, s := range specs {
		if _, ok := r.Get(s.Name); !ok {
			return false
		}
	}
	return true
}

// only returns res restricted to specs, in their order.
func (r *Result) only(specs []Spec) *Result {
	out := *r
	out.Images = nil
	for _, s := range specs {
		if b, ok := r.Get(s.Name); ok {
			out.Images = append(out.Images, b)
		}
	}
	return &out
}

// Cached returns opts' images from the source's cache entry
// (cacheDir/<Source.Key>) when it holds all of them, built by the same Go
// toolchain with the same stamps, and builds them otherwise; reused says
// which. A build is stored only when the entry is missing or stale, so a
// smaller build never replaces a fuller one; storing is best effort (the
// build is in memory), so a concurrent writer of the same entry costs
// nothing but the write.
func Cached(ctx context.Context, cacheDir string, opts Options) (res *Result, reused bool, err error) {
	opts = opts.withDefaults()
	if len(opts.LinkStrings) > 0 {
		// The entry is keyed by the source alone: a binary with other link
		// strings (a release's catalog) must never be taken for it.
		res, err = Build(ctx, opts)
		return res, false, err
	}
	dir := filepath.Join(cacheDir, opts.Source.Key())
	goVersion, err := GoVersion(ctx, opts.Go, opts.Source.Root)
	if err != nil {
		return nil, false, err
	}
	cached, loadErr := Load(dir, opts.Source.Root)
	if loadErr == nil && cached.covers(opts.Source, goVersion, opts.Specs, opts.Platforms) {
		// Prune goes by age: a build in use is young again.
		now := time.Now()
		_ = os.Chtimes(dir, now, now)
		return cached.only(opts.Specs), true, nil
	}
	res, err = Build(ctx, opts)
	if err != nil {
		return nil, false, err
	}
	stale := loadErr != nil || cached.GoVersion != goVersion || cached.Source.Version != res.Source.Version || !cached.Source.Epoch.Equal(res.Source.Epoch)
	// A build that holds everything the entry held and more replaces it
	// (the in-cluster mode's images beside the demo's); a narrower one
	// never does.
	if !stale {
		var held []Spec
		for _, b := range cached.Images {
			held = append(held, b.Spec)
		}
		stale = res.covers(cached.Source, cached.GoVersion, held, cached.Platforms)
	}
	if stale && Write(dir, res) == nil {
		Prune(cacheDir, 24*time.Hour)
	}
	return res, false, nil
}

// latestFile names the entry `make images` wrote last.
const latestFile = "latest"

// SetLatest records key as the cache's latest full build, which `make sign`
// and `make release-overlay` use.
func SetLatest(cacheDir, key string) error {
	return os.WriteFile(filepath.Join(cacheDir, latestFile), []byte(key+"\n"), 0o644)
}

// Latest is the directory of the cache's latest full build.
func Latest(cacheDir string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(cacheDir, latestFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("no build in %s yet: run make images", cacheDir)
	}
	if err != nil {
		return "", err
	}
	key := strings.TrimSpace(string(raw))
	if key == "" || filepath.Base(key) != key {
		return "", fmt.Errorf("%s: invalid entry %q", filepath.Join(cacheDir, latestFile), key)
	}
	return filepath.Join(cacheDir, key), nil
}

// Prune removes builds of edited trees, and leftovers of interrupted
// writes, older than age; the latest full build and builds of commits stay.
func Prune(cacheDir string, age time.Duration) {
	latest, _ := Latest(cacheDir)
	entries, err := os.ReadDir(cacheDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(cacheDir, name)
		if !e.IsDir() || path == latest {
			continue
		}
		if !isEdited(name) && !isLeftover(name) {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > age {
			_ = os.RemoveAll(path)
		}
	}
}

func isEdited(name string) bool { return strings.Contains(name, "-dirty-") }

func isLeftover(name string) bool {
	return strings.HasPrefix(name, ".tmp-") || strings.HasPrefix(name, ".old-")
}

// BuildVersion is the version of the build in dir (Source.Version) as a
// label value: '+', which labels do not allow, becomes '-' as in Tag, so an
// edited tree's "+dirty" still sorts after its commit.
func BuildVersion(dir string) (string, error) {
	r, err := readRecord(dir)
	if err != nil {
		return "", err
	}
	if r.Version == "" {
		return "", fmt.Errorf("the build in %s records no version", dir)
	}
	return strings.ReplaceAll(r.Version, "+", "-"), nil
}
