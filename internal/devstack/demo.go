package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// DemoPlugin is the plugin the local registry serves: the real nbp-fx
// image, built from this source tree by internal/images exactly as
// `make images` builds it (or taken from its cache, .cache/images).
const DemoPlugin = "nbp-fx"

// DemoImage is one image the local registry serves: nbp-fx in two
// versions, the same program under two signed manifest labels, the second
// asking for one more host.
type DemoImage struct {
	Name       string
	Repository string
	EnvVar     string
	// ExtraEgress are hosts this version's label asks for besides those of
	// plugins/nbp-fx/manifest.json.
	ExtraEgress []string
}

// DemoImages lists the demo images, in a fixed order.
func DemoImages() []DemoImage {
	return []DemoImage{
		{Name: "demo-v1", Repository: "plugins/" + DemoPlugin, EnvVar: "OPENFIEF_DEMO_IMAGE_V1"},
		{Name: "demo-v2", Repository: "plugins/" + DemoPlugin, EnvVar: "OPENFIEF_DEMO_IMAGE_V2", ExtraEgress: []string{"static.nbp.pl"}},
	}
}

// demoIndexes builds nbp-fx for this machine's platform, or reuses the
// source tree's cached build, and returns an image index per demo image, by
// name: the first as built, with manifest.json's label, the others with
// their extra hosts added to it.
func demoIndexes(ctx context.Context, progress io.Writer) (map[string]v1.ImageIndex, error) {
	root, err := sourceRoot()
	if err != nil {
		return nil, err
	}
	src, err := images.ReadSource(ctx, root)
	if err != nil {
		return nil, err
	}
	specs, err := images.SelectSpecs(DemoPlugin)
	if err != nil {
		return nil, err
	}
	res, reused, err := images.Cached(ctx, images.CacheDir(root), images.Options{Source: src, Specs: specs, Platforms: []v1.Platform{images.HostPlatform()}})
	if err != nil {
		return nil, fmt.Errorf("build the %s image: %w", DemoPlugin, err)
	}
	built, ok := res.Get(DemoPlugin)
	if !ok || len(built.Images) == 0 {
		return nil, fmt.Errorf("the build holds no %s image", DemoPlugin)
	}
	if progress != nil {
		how := "built"
		if reused {
			how = "reused from " + images.CacheDir(root)
		}
		fmt.Fprintf(progress, "      %s %s %s (%s)\n", how, DemoPlugin, src.Version, built.Digest)
	}
	cf, err := built.Images[0].Image.ConfigFile()
	if err != nil {
		return nil, err
	}
	label := cf.Config.Labels[plugins.ManifestLabel]
	m, err := plugins.ParseManifestLabel(label)
	if err != nil {
		return nil, fmt.Errorf("the %s image's label: %w", DemoPlugin, err)
	}
	out := map[string]v1.ImageIndex{}
	for _, d := range DemoImages() {
		if len(d.ExtraEgress) == 0 {
			out[d.Name] = built.Index
			continue
		}
		more := m
		more.Egress = append(slices.Clone(m.Egress), d.ExtraEgress...)
		raw, err := json.Marshal(more)
		if err != nil {
			return nil, err
		}
		if out[d.Name], err = images.WithManifestLabel(built.Index, string(raw)); err != nil {
			return nil, fmt.Errorf("%s: %w", d.Name, err)
		}
	}
	return out, nil
}

// sourceRoot finds the OpenFief source tree the demo image is built from:
// at or above the working directory, or else at or above the running
// binary (.bin/openfief of a clone).
func sourceRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root, err := images.FindRoot(wd)
	if err == nil {
		return root, nil
	}
	if exe, exeErr := os.Executable(); exeErr == nil {
		if root, exeErr := images.FindRoot(filepath.Dir(exe)); exeErr == nil {
			return root, nil
		}
	}
	return "", errors.Join(errors.New("openfief dev builds its demo plugin image from the OpenFief source: run it inside a clone"), err)
}
