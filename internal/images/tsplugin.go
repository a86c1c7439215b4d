package images

import (
	"context"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TSExample is the TypeScript SDK's example connector: its sources and its
// manifest, relative to the module root.
var TSExample = struct{ Name, Sources, Manifest string }{
	Name:     "fx-rates-ts",
	Sources:  "sdk/ts/examples/fx-rates",
	Manifest: "sdk/ts/examples/fx-rates/manifest.json",
}

// BuildTSExample builds the example connector's image for archs (sorted by
// NodePluginIndex), its application assembled in a temporary folder;
// extraCA is appended to its CA bundle (a test's stand-in CA, or nil). It
// fails at once, naming make ts-deps, when sdk/ts's npm packages are not
// installed.
func BuildTSExample(ctx context.Context, src Source, archs []string, extraCA []byte) (v1.ImageIndex, error) {
	if err := TSDepsInstalled(src.Root); err != nil {
		return nil, err
	}
	manifest, err := os.ReadFile(filepath.Join(src.Root, TSExample.Manifest))
	if err != nil {
		return nil, err
	}
	runtimes := map[string]string{}
	for _, a := range archs {
		if runtimes[a], err = NodeRuntime(ctx, a); err != nil {
			return nil, err
		}
	}
	tmp, err := os.MkdirTemp("", "openfief-ts-app-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	app := filepath.Join(tmp, "app")
	if err := TSPluginApp(ctx, src.Root, TSExample.Sources, app); err != nil {
		return nil, err
	}
	return NodePluginIndex(src, NodePlugin{
		Name:         TSExample.Name,
		Description:  "OpenFief example connector in TypeScript: FX rates from a made-up bank's API",
		Licenses:     "Apache-2.0",
		ManifestJSON: manifest,
		Runtimes:     runtimes,
		App:          app,
		ExtraCA:      extraCA,
	})
}
