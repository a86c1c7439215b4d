//go:build heavy

package harness

import (
	"context"
	"strings"
	"sync"
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

// hostImage is the image of idx for this machine's platform.
func hostImage(t *testing.T, idx v1.ImageIndex) v1.Image {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	arch := images.HostPlatform().Architecture
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.Architecture == arch {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	t.Fatalf("the index has no image for %s", arch)
	return nil
}

var (
	tsExampleOnce sync.Once
	tsExampleImg  v1.Image
	tsExampleErr  error
)

// tsExample builds the TypeScript example connector's image for this
// machine once for the package's tests.
func tsExample(t *testing.T) v1.Image {
	t.Helper()
	tsExampleOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		began := time.Now()
		var idx v1.ImageIndex
		if idx, tsExampleErr = images.BuildTSExample(ctx, tsSource(t), []string{images.HostPlatform().Architecture}, nil); tsExampleErr != nil {
			return
		}
		tsExampleImg = hostImage(t, idx)
		t.Logf("built the TypeScript example's image in %s", time.Since(began).Round(time.Millisecond))
	})
	if tsExampleErr != nil {
		t.Fatal(tsExampleErr)
	}
	return tsExampleImg
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
