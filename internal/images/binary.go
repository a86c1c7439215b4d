package images

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// BuildBinary builds the Go package pkg (./cmd/openfief) of root for
// platform p, as the images' binaries are built (GoFlags, the same
// environment), with link's string variables set through -X, and returns
// the binary. A release builds the CLI this way, with the release's
// catalog, version and check probe linked in (OF-30). goCmd empty means
// "go" on PATH.
func BuildBinary(ctx context.Context, goCmd, root string, p v1.Platform, pkg string, link map[string]string) ([]byte, error) {
	if goCmd == "" {
		goCmd = "go"
	}
	flags := GoFlags
	if len(link) > 0 {
		var err error
		if flags, err = linkFlags(link); err != nil {
			return nil, fmt.Errorf("%s: %w", pkg, err)
		}
	}
	dir, err := os.MkdirTemp("", "openfief-binary-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := goBuild(ctx, goCmd, root, p, flags, []Spec{{Package: pkg}}, dir); err != nil {
		return nil, err
	}
	name := path.Base(pkg)
	if p.OS == "windows" {
		name += ".exe"
	}
	return os.ReadFile(filepath.Join(dir, name))
}
