// Command release writes a kustomize overlay that installs deploy/operator,
// deploy/egress-proxy and deploy/core with their images pinned to the digests the last
// `make images REGISTRY=...` pushed (internal/images; docs/images.md):
//
//	go run ./hack/release [--out DIR] [--dir BUILD]
//
// The committed manifests name deliberately unresolvable images
// (unpinned.invalid/...); the overlay sets each by digest, as
// `kustomize edit set image` would, and is checked by rendering it.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/plugins"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	out := fs.String("out", "", "directory of the overlay (default <repository>/.cache/release)")
	dir := fs.String("dir", "", "build directory (default: the latest build in <repository>/.cache/images)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	root, err := images.FindRoot(".")
	if err != nil {
		return err
	}
	if *dir == "" {
		if *dir, err = images.Latest(images.CacheDir(root)); err != nil {
			return err
		}
	}
	if *out == "" {
		*out = filepath.Join(root, ".cache", "release")
	}
	rec, err := images.ReadPushRecord(*dir)
	if err != nil {
		return err
	}
	refs := map[string]plugins.ImageRef{}
	for _, name := range []string{"operator", "egress-proxy", "openfief-core"} {
		if refs[name], err = rec.Ref(name); err != nil {
			return err
		}
	}
	header := fmt.Sprintf("Written by hack/release (make release-overlay) from the build in %s.\n"+
		"Install after deploy/crds: kubectl apply -k <this directory>", *dir)
	if err := images.WriteReleaseOverlay(*out, filepath.Join(root, "deploy"), refs, header); err != nil {
		return err
	}
	fmt.Printf("wrote %s\n  operator:      %s\n  egress-proxy:  %s\n  openfief-core: %s\ninstall with: kubectl apply -k deploy/crds && kubectl apply -k %s\n",
		filepath.Join(*out, "kustomization.yaml"), refs["operator"], refs["egress-proxy"], refs["openfief-core"], *out)
	return nil
}
