//go:build heavy

package harness

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/arkadiuss/openfief/internal/images"
)

// The TypeScript plugins' images are built as internal/images builds the
// example connector's (BuildTSExample, NodePluginIndex): Debian's Node.js
// from NodeRuntime's cache (per user; the first run ever downloads it) and
// the application compiled with sdk/ts's TypeScript, whose npm packages
// `make ts-deps` installs.

// tsSource is the source the test images are stamped with.
func tsSource(t *testing.T) images.Source {
	t.Helper()
	root, err := images.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	return images.Source{Root: root, Commit: strings.Repeat("ab", 20), Epoch: time.Unix(1767225600, 0).UTC(), Version: "v0.0.0-test"}
}

// indexImage is the image of idx for arch.
func indexImage(idx v1.ImageIndex, arch string) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.Architecture == arch {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("the index has no image for %s", arch)
}

// tsExampleBuild is the TypeScript example connector's image for this
// machine, built once for the package's tests.
var tsExampleBuild build

func tsExample(t *testing.T) v1.Image {
	t.Helper()
	src := tsSource(t)
	return tsExampleBuild.get(t, "the TypeScript example", func(ctx context.Context) (v1.Image, error) {
		arch := images.HostPlatform().Architecture
		idx, err := images.BuildTSExample(ctx, src, []string{arch}, nil)
		if err != nil {
			return nil, err
		}
		return indexImage(idx, arch)
	})
}

// TestTSExamplePasses runs the TypeScript SDK's example connector
// (sdk/ts/examples/fx-rates) in the sandbox from the image internal/images
// builds for it: no check fails; it serves, checks the core's token,
// imports the sample file, stops on SIGTERM and reaches its bank only
// through the egress proxy (whose stand-in makes its Sync unavailable).
func TestTSExamplePasses(t *testing.T) {
	needSandbox(t)
	rep := runPlugin(t, NewRuntime, tsExample(t), images.TSExample.Name, `{"quote":"PLN"}`)
	wantPass(t, rep, CheckServes, CheckAuth, CheckImportFile, CheckEgress, CheckNetwork, CheckSigterm, CheckResources)
}
