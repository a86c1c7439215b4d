package images

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TSExample is the TypeScript SDK's example connector: its sources and its
// manifest, relative to the module root.
var TSExample = struct{ Name, Sources, Manifest string }{
	Name:     "fx-rates-ts",
	Sources:  "sdk/ts/examples/fx-rates",
	Manifest: "sdk/ts/examples/fx-rates/manifest.json",
}

// NodeRuntime returns the directory of Debian's Node.js for arch (amd64,
// arm64), resolving and unpacking it on first use (hack/node-runtime.sh,
// cached per user).
func NodeRuntime(ctx context.Context, root, arch string) (string, error) {
	out, err := runScript(ctx, root, 10*time.Minute, "hack/node-runtime.sh", arch)
	if err != nil {
		return "", err
	}
	dir := strings.TrimSpace(out)
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("hack/node-runtime.sh printed %q, not a directory", dir)
	}
	return dir, nil
}

// TSPluginApp writes the /app of the TypeScript plugin whose sources are in
// src (relative to root) into out, which must be empty or missing
// (hack/ts-plugin-app.sh).
func TSPluginApp(ctx context.Context, root, src, out string) error {
	_, err := runScript(ctx, root, 10*time.Minute, "hack/ts-plugin-app.sh", filepath.Join(root, src), out)
	return err
}

// BuildTSExample builds the example connector's image for archs (sorted by
// NodePluginIndex), its application assembled in a temporary folder;
// extraCA is appended to its CA bundle (a test's stand-in CA, or nil).
func BuildTSExample(ctx context.Context, src Source, archs []string, extraCA []byte) (v1.ImageIndex, error) {
	manifest, err := os.ReadFile(filepath.Join(src.Root, TSExample.Manifest))
	if err != nil {
		return nil, err
	}
	runtimes := map[string]string{}
	for _, a := range archs {
		if runtimes[a], err = NodeRuntime(ctx, src.Root, a); err != nil {
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

// runScript runs one of the repository's scripts from root, bounded by
// timeout, and returns its standard output; its standard error is kept for
// the error.
func runScript(ctx context.Context, root string, timeout time.Duration, script string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, script), args...)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", script, strings.Join(args, " "), err, lastBytes(stderr.Bytes(), 4096))
	}
	return stdout.String(), nil
}

// lastBytes is the end of b, at most n bytes of it.
func lastBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
