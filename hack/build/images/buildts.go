package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/arkadiuss/openfief/internal/images"
)

// buildTS is `images build-ts`: build the TypeScript SDK's example
// connector's image (Debian's Node.js and the compiled example), write it as
// an OCI layout of its own and, with --push, push it and record where, so
// `images sign --dir` signs it.
func buildTS(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("images build-ts", flag.ContinueOnError)
	push := fs.String("push", "", "registry prefix to push to (the image goes to PREFIX/openfief/"+images.TSExample.Name+")")
	insecure := fs.Bool("insecure", false, "push over plain HTTP (loopback registries always are)")
	platforms := fs.String("platform", "linux/amd64,linux/arm64", "comma-separated platforms")
	cache := fs.String("cache", "", "cache directory (default <repository>/.cache/images)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	start := time.Now()
	root, err := images.FindRoot(".")
	if err != nil {
		return err
	}
	if *cache == "" {
		*cache = images.CacheDir(root)
	}
	src, err := images.ReadSource(ctx, root)
	if err != nil {
		return err
	}
	var archs []string
	for p := range strings.SplitSeq(*platforms, ",") {
		pl, err := images.ParsePlatform(p)
		if err != nil {
			return err
		}
		archs = append(archs, pl.Architecture)
	}
	fmt.Printf("building %s %s for %s (Debian's Node.js, downloaded by the first build)\n", images.TSExample.Name, src.Version, strings.Join(archs, ", "))
	idx, err := images.BuildTSExample(ctx, src, archs, nil)
	if err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, desc := range im.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return err
		}
		pi, err := images.Describe(*desc.Platform, img)
		if err != nil {
			return err
		}
		fmt.Printf("  %s  linux/%-7s %9s  %s\n", images.TSExample.Name, desc.Platform.Architecture, images.MiB(pi.Size), pi.Digest)
	}
	// One layout, replaced by each build: the example is not released.
	dir := filepath.Join(*cache, images.TSExample.Name)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendIndex(idx); err != nil {
		return err
	}
	fmt.Printf("OCI layout %s (index %s)\n", dir, d)
	if *push != "" {
		ref, err := images.PushIndex(ctx, images.Repository(*push, images.TSExample.Name), idx,
			images.PushOptions{Insecure: *insecure, Tag: src.Tag(), Progress: os.Stdout})
		if err != nil {
			return err
		}
		rec := images.PushRecord{Prefix: *push, Images: []images.Pushed{{Name: images.TSExample.Name, Ref: ref.String()}}}
		if err := images.WritePushRecord(dir, rec); err != nil {
			return err
		}
		fmt.Printf("next: go run ./hack/build/images sign --key <cosign key> --dir %s\n", dir)
	}
	fmt.Printf("done in %s\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}
