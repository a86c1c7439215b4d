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
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/release/overlay"
)

// DemoPlugin is the connector the local registry serves: the real nbp-fx
// image, built from this source tree by internal/images exactly as
// `make images` builds it (or taken from its cache, .cache/images).
const DemoPlugin = "nbp-fx"

// DemoView is the view the local registry serves, built the same way: the
// real webdav-csv image, which the demo points at the WebDAV stand-in.
const DemoView = "webdav-csv"

// DemoImage is one image the local registry serves: nbp-fx in two
// versions, the same program under two signed manifest labels, the second
// asking for one more host; and webdav-csv as built.
type DemoImage struct {
	Name string
	// Plugin is the image's first-party plugin (plugins/<Plugin>, the
	// internal/images spec of that name).
	Plugin     string
	Repository string
	EnvVar     string
	// ExtraEgress are hosts this version's label asks for besides those of
	// plugins/<Plugin>/manifest.json.
	ExtraEgress []string
}

// DemoImages lists the demo images, in a fixed order.
func DemoImages() []DemoImage {
	return []DemoImage{
		{Name: "demo-v1", Plugin: DemoPlugin, Repository: "plugins/" + DemoPlugin, EnvVar: "OPENFIEF_DEMO_IMAGE_V1"},
		{Name: "demo-v2", Plugin: DemoPlugin, Repository: "plugins/" + DemoPlugin, EnvVar: "OPENFIEF_DEMO_IMAGE_V2", ExtraEgress: []string{"static.nbp.pl"}},
		{Name: "demo-view", Plugin: DemoView, Repository: "plugins/" + DemoView, EnvVar: "OPENFIEF_DEMO_IMAGE_VIEW"},
	}
}

// demoPlugins are the plugins the demo images are built from, sorted.
func demoPlugins() []string {
	var names []string
	for _, d := range DemoImages() {
		names = append(names, d.Plugin)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// demoIndexes builds the demo plugins for this machine's platform, or
// reuses the source tree's cached build, and returns an image index per
// demo image, by name: as built, with manifest.json's label, or with the
// image's extra hosts added to that label. withProbe adds the check probe
// under overlay.CheckProbe: a real node runs it as every plugin pod's
// isolation gate (OF-42).
func demoIndexes(ctx context.Context, progress io.Writer, withProbe bool) (map[string]v1.ImageIndex, error) {
	root, err := sourceRoot()
	if err != nil {
		return nil, err
	}
	src, err := images.ReadSource(ctx, root)
	if err != nil {
		return nil, err
	}
	names := demoPlugins()
	if withProbe {
		names = append(names, overlay.CheckProbe)
	}
	specs, err := images.SelectSpecs(names...)
	if err != nil {
		return nil, err
	}
	res, reused, err := images.Cached(ctx, images.CacheDir(root), images.Options{Source: src, Specs: specs, Platforms: []v1.Platform{images.HostPlatform()}})
	if err != nil {
		return nil, fmt.Errorf("build the demo images (%s): %w", strings.Join(names, ", "), err)
	}
	out := map[string]v1.ImageIndex{}
	if withProbe {
		built, ok := res.Get(overlay.CheckProbe)
		if !ok {
			return nil, fmt.Errorf("the build holds no %s image", overlay.CheckProbe)
		}
		out[overlay.CheckProbe] = built.Index
	}
	for _, d := range DemoImages() {
		built, ok := res.Get(d.Plugin)
		if !ok || len(built.Images) == 0 {
			return nil, fmt.Errorf("the build holds no %s image", d.Plugin)
		}
		if progress != nil && d.Name == firstImageOf(d.Plugin) {
			how := "built"
			if reused {
				how = "reused from " + images.CacheDir(root)
			}
			fmt.Fprintf(progress, "      %s %s %s (%s)\n", how, d.Plugin, src.Version, built.Digest)
		}
		if len(d.ExtraEgress) == 0 {
			out[d.Name] = built.Index
			continue
		}
		cf, err := built.Images[0].Image.ConfigFile()
		if err != nil {
			return nil, err
		}
		m, err := plugins.ParseManifestLabel(cf.Config.Labels[plugins.ManifestLabel])
		if err != nil {
			return nil, fmt.Errorf("the %s image's label: %w", d.Plugin, err)
		}
		m.Egress = append(slices.Clone(m.Egress), d.ExtraEgress...)
		raw, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		if out[d.Name], err = images.WithManifestLabel(built.Index, string(raw)); err != nil {
			return nil, fmt.Errorf("%s: %w", d.Name, err)
		}
	}
	return out, nil
}

// firstImageOf is the name of the first demo image of plugin.
func firstImageOf(plugin string) string {
	for _, d := range DemoImages() {
		if d.Plugin == plugin {
			return d.Name
		}
	}
	return ""
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
