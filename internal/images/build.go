package images

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"
)

// Options says what to build and from where.
type Options struct {
	// Source is the tree and its stamps (ReadSource); required.
	Source Source
	// Specs are the images to build; nil means Specs().
	Specs []Spec
	// Platforms are the platforms of each index, in order; nil means
	// Platforms() (linux/amd64 and linux/arm64).
	Platforms []v1.Platform
	// Go is the go command; empty means "go" on PATH.
	Go string
	// Progress receives a line per compile step and per image; nil
	// discards them.
	Progress io.Writer
	// LinkStrings sets string variables of one image's binary at link time
	// (go build -ldflags -X), by image name then by the variable's full
	// symbol: a release links its catalog into the operator this way
	// (OF-30). Values may not hold spaces or quotes. Cached does not cache
	// a build that sets any.
	LinkStrings map[string]map[string]string
}

func (o Options) withDefaults() Options {
	if o.Specs == nil {
		o.Specs = Specs()
	}
	if o.Platforms == nil {
		o.Platforms = Platforms()
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o
}

// Result is a build: one image index per spec.
type Result struct {
	// Source is what was built.
	Source Source
	// GoVersion is the toolchain that compiled the binaries.
	GoVersion string
	// Platforms are the platforms of every index, in order.
	Platforms []v1.Platform
	// Images are the indexes, in the order of the specs.
	Images []Built
}

// Built is one spec's image index and its images.
type Built struct {
	Spec   Spec
	Index  v1.ImageIndex
	Digest v1.Hash
	// Images are the index's images, one per platform, in order.
	Images []PlatformImage
}

// PlatformImage is one image of an index.
type PlatformImage struct {
	Platform v1.Platform
	Image    v1.Image
	Digest   v1.Hash
	// Size is what a pull transfers: manifest, config and compressed
	// layers.
	Size int64
}

// Get returns the index of the named image.
func (r *Result) Get(name string) (Built, bool) {
	for _, b := range r.Images {
		if b.Spec.Name == name {
			return b, true
		}
	}
	return Built{}, false
}

// Build compiles every spec's binary for every platform and assembles the
// images and their indexes in memory; Write stores them as an OCI layout
// and Push sends them to a registry.
func Build(ctx context.Context, opts Options) (*Result, error) {
	opts = opts.withDefaults()
	src := opts.Source
	if src.Root == "" || src.Commit == "" {
		return nil, fmt.Errorf("images: Options.Source is required (ReadSource)")
	}
	goVersion, err := GoVersion(ctx, opts.Go, src.Root)
	if err != nil {
		return nil, err
	}
	b, err := newBase(src.Epoch)
	if err != nil {
		return nil, err
	}
	annotations := make([]map[string]string, len(opts.Specs))
	configLabels := make([]map[string]string, len(opts.Specs))
	for i, s := range opts.Specs {
		annotations[i] = Annotations(src, s)
		if configLabels[i], err = labels(src.Root, s, annotations[i]); err != nil {
			return nil, err
		}
	}
	tmp, err := os.MkdirTemp("", "openfief-images-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	res := &Result{Source: src, GoVersion: goVersion, Platforms: opts.Platforms, Images: make([]Built, len(opts.Specs))}
	for i, s := range opts.Specs {
		res.Images[i].Spec = s
	}
	for _, p := range opts.Platforms {
		out := filepath.Join(tmp, p.OS+"-"+p.Architecture)
		start := time.Now()
		if err := compile(ctx, opts.Go, src.Root, p, opts.Specs, opts.LinkStrings, out); err != nil {
			return nil, err
		}
		fmt.Fprintf(opts.Progress, "compiled %d binaries for %s with %s in %s\n", len(opts.Specs), p, goVersion, time.Since(start).Round(100*time.Millisecond))
		imgs := make([]PlatformImage, len(opts.Specs))
		g, _ := errgroup.WithContext(ctx)
		g.SetLimit(runtime.NumCPU())
		for i, s := range opts.Specs {
			g.Go(func() error {
				bin, err := os.ReadFile(filepath.Join(out, s.Name))
				if err != nil {
					return err
				}
				img, err := newImage(p, s, b, bin, src.Epoch, configLabels[i], annotations[i])
				if err != nil {
					return fmt.Errorf("image %s for %s: %w", s.Name, p, err)
				}
				imgs[i], err = Describe(p, img)
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		for i, s := range opts.Specs {
			fmt.Fprintf(opts.Progress, "  %-13s %-12s %9s  %s\n", s.Name, p, MiB(imgs[i].Size), imgs[i].Digest)
			res.Images[i].Images = append(res.Images[i].Images, imgs[i])
		}
	}
	for i := range res.Images {
		bi := &res.Images[i]
		imgs := make([]v1.Image, len(bi.Images))
		for j, pi := range bi.Images {
			imgs[j] = pi.Image
		}
		bi.Index = newIndex(imgs, opts.Platforms, annotations[i])
		if bi.Digest, err = bi.Index.Digest(); err != nil {
			return nil, err
		}
		fmt.Fprintf(opts.Progress, "  %-13s %-12s %9s  %s\n", bi.Spec.Name, "index", "", bi.Digest)
	}
	return res, nil
}

// Describe computes an image's digest and pull size.
func Describe(p v1.Platform, img v1.Image) (PlatformImage, error) {
	d, err := img.Digest()
	if err != nil {
		return PlatformImage{}, err
	}
	m, err := img.Manifest()
	if err != nil {
		return PlatformImage{}, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return PlatformImage{}, err
	}
	size := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		size += l.Size
	}
	return PlatformImage{Platform: p, Image: img, Digest: d, Size: size}, nil
}

// MiB formats a size in mebibytes.
func MiB(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// HostPlatform is this machine's platform as a Linux image platform: what
// the local modes and the tests build when one platform is enough.
func HostPlatform() v1.Platform {
	if runtime.GOARCH == "arm64" {
		return v1.Platform{OS: "linux", Architecture: "arm64"}
	}
	return v1.Platform{OS: "linux", Architecture: "amd64"}
}
