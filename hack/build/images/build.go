package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/arkadiuss/openfief/internal/images"
)

// build is `images build`: build every image for every platform, write the
// layout, compare with the previous build of the same source, push.
func build(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("images build", flag.ContinueOnError)
	push := fs.String("push", "", "registry prefix to push to, such as localhost:5000 or ghcr.io/arkadiuss (images go to PREFIX/openfief/<name>)")
	insecure := fs.Bool("insecure", false, "push over plain HTTP (loopback registries always are)")
	platforms := fs.String("platform", "", "comma-separated platforms (default linux/amd64,linux/arm64)")
	only := fs.String("image", "", "comma-separated images (default all: operator,egress-proxy,openfief-core,nbp-fx,ibkr-flex,webdav-csv,check-probe)")
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
	opts := images.Options{Source: src, Progress: os.Stdout}
	if *only != "" {
		if opts.Specs, err = images.SelectSpecs(strings.Split(*only, ",")...); err != nil {
			return err
		}
	}
	if *platforms != "" {
		for p := range strings.SplitSeq(*platforms, ",") {
			pl, err := images.ParsePlatform(p)
			if err != nil {
				return err
			}
			opts.Platforms = append(opts.Platforms, pl)
		}
	}
	fmt.Printf("building %s (commit %s, SOURCE_DATE_EPOCH=%d)\n", src.Version, src.Commit, src.Epoch.Unix())
	res, err := images.Build(ctx, opts)
	if err != nil {
		return err
	}
	dir := filepath.Join(*cache, src.Key())
	if prev, err := images.Load(dir, root); err == nil && compare(prev, res) {
		fmt.Println("kept the layout of the previous build, which holds exactly these images")
	} else if err := images.Write(dir, res); err != nil {
		return err
	}
	if err := images.SetLatest(*cache, src.Key()); err != nil {
		return err
	}
	images.Prune(*cache, 24*time.Hour)
	var total int64
	for _, b := range res.Images {
		for _, pi := range b.Images {
			total += pi.Size
		}
	}
	fmt.Printf("OCI layout %s (%d images, %s in all)\n", dir, len(res.Images), images.MiB(total))
	if *push != "" {
		pushed, err := images.Push(ctx, res, *push, images.PushOptions{Insecure: *insecure, Tag: src.Tag(), Progress: os.Stdout})
		if err != nil {
			return err
		}
		if err := images.WritePushRecord(dir, images.PushRecord{Prefix: *push, Images: pushed}); err != nil {
			return err
		}
		fmt.Println("next: make sign KEY=<cosign key>, make attest KEY=<cosign key>, then make release-overlay")
	}
	fmt.Printf("done in %s\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// compare reports whether a rebuild of the same source gave the same
// digests (it should: the build is reproducible), and returns whether prev
// holds exactly the images of res, so its layout can stay as it is (a
// local platform may be reading it).
func compare(prev, res *images.Result) bool {
	same, differ := 0, []string{}
	for _, b := range res.Images {
		p, ok := prev.Get(b.Spec.Name)
		if !ok || !samePlatforms(p.Images, b.Images) {
			continue
		}
		if p.Digest == b.Digest {
			same++
		} else {
			differ = append(differ, b.Spec.Name)
		}
	}
	switch {
	case len(differ) > 0:
		fmt.Printf("NOT reproducible: %s differ from the previous build of this source (Go %s then, %s now)\n", strings.Join(differ, ", "), prev.GoVersion, res.GoVersion)
	case same > 0:
		fmt.Printf("reproducible: %d indexes identical to the previous build of this source\n", same)
	}
	return len(differ) == 0 && same == len(res.Images) && len(prev.Images) == len(res.Images)
}

func samePlatforms(a, b []images.PlatformImage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Platform.Equals(b[i].Platform) {
			return false
		}
	}
	return true
}
