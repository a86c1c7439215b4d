package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// maxEntries bounds the files, folders and links Unpack writes: a large
// distribution image has tens of thousands.
const maxEntries = 200_000

// Unpack writes img's root file system into dir (which must be empty), applying
// whiteouts, refusing paths that leave dir, device nodes and setuid/setgid bits,
// and stopping at maxBytes of file content (ErrTooBig). It returns what the
// image's config says to run.
//
// The layers are flattened by go-containerregistry's mutate.Extract
// (whiteouts and opaque folders applied, the upper layer's entry winning);
// every entry is then written by writeTree, which resolves each parent
// inside dir as the image's own root (a symbolic link in the image cannot
// lead a write outside it) and creates the last element without following
// anything. Owners are kept when the caller is root.
func Unpack(ctx context.Context, img v1.Image, dir string, maxBytes int64) (Config, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return Config{}, fmt.Errorf("sandbox: reading the image config: %w", err)
	}
	if cf == nil {
		return Config{}, errors.New("sandbox: the image has no config")
	}
	if err := checkEmptyDir(dir); err != nil {
		return Config{}, err
	}
	// A container's "/" is 0755 whatever folder holds it.
	if err := os.Chmod(dir, 0o755); err != nil {
		return Config{}, fmt.Errorf("sandbox: unpack folder: %w", err)
	}
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }() // stops Extract's goroutine
	stop := context.AfterFunc(ctx, func() { _ = rc.Close() })
	defer stop()
	if err := writeTree(rc, dir, maxBytes, maxEntries); err != nil {
		if ctx.Err() != nil {
			return Config{}, fmt.Errorf("sandbox: unpacking: %w", ctx.Err())
		}
		return Config{}, fmt.Errorf("sandbox: unpacking: %w", err)
	}
	c := cf.Config
	return Config{
		Entrypoint: slices.Clone(c.Entrypoint),
		Cmd:        slices.Clone(c.Cmd),
		Env:        slices.Clone(c.Env),
		WorkingDir: c.WorkingDir,
		User:       c.User,
		Labels:     maps.Clone(c.Labels),
	}, nil
}

// checkEmptyDir fails unless dir is an existing, empty folder.
func checkEmptyDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sandbox: unpack folder: %w", err)
	}
	defer func() { _ = f.Close() }() // read only
	names, err := f.Readdirnames(1)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("sandbox: unpack folder %s: %w", dir, err)
	}
	if len(names) > 0 {
		return fmt.Errorf("sandbox: unpack folder %s is not empty", dir)
	}
	return nil
}
