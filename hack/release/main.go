// Command release makes a release (make release, OF-30) or writes a
// kustomize overlay of the last build (make release-overlay).
//
//	go run ./hack/release make --version vX.Y.Z --registry PREFIX (--key FILE | --keyless) [--publisher NAME] [--out DIR] [--platform P,...] [--insecure] [--untagged]
//	go run ./hack/release tag --version vX.Y.Z [--dir DIR] [--insecure]
//	go run ./hack/release overlay [--out DIR] [--dir BUILD] [--registry-config] [--api-server-cidr CIDR]...
//
// make builds every image from this commit, pushes and signs it, links the
// catalog that pins the first-party plugins into the operator and the CLI,
// and writes install.yaml, plugins.json with its signature, the openfief
// binaries, images.json, RELEASE.md and SHA256SUMS into
// .cache/release/<version> (internal/release, docs/images.md).
//
// tag tags every image of a made release with its version, by digest: the
// release workflow pushes them untagged and tags them once the release is
// published (make release-tag).
//
// overlay writes a kustomize overlay of the whole platform:
// deploy/crds, deploy/admission, deploy/core, deploy/egress-proxy and
// deploy/operator, with the images pinned to the digests the last
// `make images REGISTRY=...` pushed (internal/release/overlay; docs/images.md)
// and every object labelled with the build's version, and the ConfigMap
// openfief-release naming the pushed check probe image (OF-29; informational,
// the CLI does not read it).
//
// The committed manifests name deliberately unresolvable images
// (unpinned.invalid/...); the overlay sets each by digest, as
// `kustomize edit set image` would, and is checked by rendering it. Install
// it with `openfief platform install --overlay DIR` (docs/operator.md), or
// with `kubectl apply --server-side -k DIR` once the API server's addresses
// are in it (--api-server-cidr).
package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/release/overlay"
)

// verbs are the commands of release, by name.
var verbs = map[string]func([]string) error{
	"make":    makeRelease,
	"overlay": writeOverlay,
	"tag":     tagRelease,
}

func main() {
	if len(os.Args) < 2 || verbs[os.Args[1]] == nil {
		given := "no verb"
		if len(os.Args) >= 2 {
			given = fmt.Sprintf("unknown verb %q", os.Args[1])
		}
		fmt.Fprintf(os.Stderr, "release: %s: want one of %s\n", given, strings.Join(slices.Sorted(maps.Keys(verbs)), ", "))
		os.Exit(2)
	}
	if err := verbs[os.Args[1]](os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// cidrList is a repeatable flag.
type cidrList []string

func (l *cidrList) String() string { return strings.Join(*l, ",") }

func (l *cidrList) Set(v string) error {
	for s := range strings.SplitSeq(v, ",") {
		*l = append(*l, strings.TrimSpace(s))
	}
	return nil
}

// writeOverlay writes the platform overlay of the last build.
func writeOverlay(args []string) error {
	fs := flag.NewFlagSet("release overlay", flag.ContinueOnError)
	out := fs.String("out", "", "directory of the overlay (default <repository>/.cache/release)")
	dir := fs.String("dir", "", "build directory (default: the latest build in <repository>/.cache/images)")
	registryConfig := fs.Bool("registry-config", false, "add deploy/operator/components/registry-config: the operator reads pull credentials from the Secret openfief-registry-config")
	var cidrs cidrList
	fs.Var(&cidrs, "api-server-cidr", "the API server's address (IP or CIDR) for the core's NetworkPolicy, repeatable; without it the installer fills it from the cluster")
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
	version, err := images.BuildVersion(*dir)
	if err != nil {
		return err
	}
	refs := map[string]plugins.ImageRef{}
	for _, name := range []string{"operator", "egress-proxy", "openfief-core", overlay.CheckProbe} {
		if refs[name], err = rec.Ref(name); err != nil {
			return fmt.Errorf("%w: a release names every image of `make images` (push them all with make images REGISTRY=...)", err)
		}
	}
	header := fmt.Sprintf("Written by hack/release overlay (make release-overlay) from the build in %s, version %s.\n"+
		"Install: openfief platform install --overlay <this directory> (docs/operator.md)", *dir, version)
	if err := overlay.WritePlatform(*out, filepath.Join(root, "deploy"), overlay.Platform{
		Refs: refs, Version: version, APIServerCIDRs: cidrs, RegistryConfig: *registryConfig, Header: header,
	}); err != nil {
		return err
	}
	fmt.Printf("wrote %s (version %s)\n  operator:      %s\n  egress-proxy:  %s\n  openfief-core: %s\n  check-probe:   %s\ninstall with: openfief platform install --overlay %s\n",
		filepath.Join(*out, "kustomization.yaml"), version, refs["operator"], refs["egress-proxy"], refs["openfief-core"], refs[overlay.CheckProbe], *out)
	return nil
}
