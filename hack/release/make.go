package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/release"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

// makeRelease is `release make`: the whole release, signed with a key or,
// in the release workflow, keyless as that workflow (--keyless).
func makeRelease(args []string) error {
	fs := flag.NewFlagSet("release make", flag.ContinueOnError)
	version := fs.String("version", "", "the release's version, vMAJOR.MINOR.PATCH[-pre] (required)")
	registry := fs.String("registry", "", "where the images go: PREFIX/openfief/<name>, PREFIX being host[:port][/path] (required)")
	keyFile := fs.String("key", "", "PEM private key that signs every image and publishes the catalog's plugins (ECDSA P-256; COSIGN_PASSWORD unlocks an encrypted one) (this or --keyless)")
	keyless := fs.Bool("keyless", false, "sign keyless with the GitHub Actions job's OIDC token (public-good Fulcio and Rekor); the catalog's publisher is OpenFief's CI (only .github/workflows/images.yml on main signs as it) (this or --key)")
	publisher := fs.String("publisher", "openfief", "the publisher's name in the catalog")
	out := fs.String("out", "", "directory of the release's files, which must not exist (default <repository>/.cache/release/<version>)")
	platforms := fs.String("platform", "", "platforms of every image, comma-separated (default linux/amd64,linux/arm64)")
	insecure := fs.Bool("insecure", false, "push over plain HTTP (loopback registries always are)")
	builderID := fs.String("builder-id", images.LocalBuilderID, "the builder the images' SLSA provenance names (CI passes its workflow's URI)")
	untagged := fs.Bool("untagged", false, "push the images by digest only, without the version tag (the release workflow tags them with `release tag` once the release is published)")
	command := fs.String("command", "", "the command recorded in the provenance (default `make release VERSION=<version>`)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("release make takes no arguments, got %q", fs.Args())
	}
	if (*keyFile == "") == !*keyless {
		return errors.New("one of --key (a PEM private key) or --keyless is required (docs/images.md, Releases)")
	}
	root, err := images.FindRoot(".")
	if err != nil {
		return err
	}
	signer, publishedBy, err := releaseSigner(*keyFile, *keyless, *publisher)
	if err != nil {
		return err
	}
	var ps []v1.Platform
	if *platforms != "" {
		for p := range strings.SplitSeq(*platforms, ",") {
			pl, err := images.ParsePlatform(strings.TrimSpace(p))
			if err != nil {
				return fmt.Errorf("--platform: %w", err)
			}
			ps = append(ps, pl)
		}
	}
	if *out == "" {
		*out = filepath.Join(root, ".cache", "release", *version)
	}
	if *command == "" {
		*command = "make release VERSION=" + *version
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := release.Make(ctx, release.Options{
		Root: root, Version: *version, Registry: *registry, Insecure: *insecure, Signer: signer,
		BuilderID: *builderID, Command: *command, Untagged: *untagged,
		Publisher: publishedBy,
		Out:       *out, Platforms: ps, Progress: os.Stdout,
	})
	if err != nil {
		return err
	}
	fmt.Printf("release %s in %s\ninstall with: openfief platform install --overlay %s\n", res.Version, res.Out, res.Out)
	return nil
}

// releaseSigner is the release's signer and the catalog publisher its
// signatures verify as: the key file's key under name, or keyless as the
// GitHub Actions job, published as OpenFief's CI (OF-30). A keyless run
// anywhere but images.yml on main signs as another subject, so its plugins
// would not verify against its own catalog: it fails closed.
func releaseSigner(keyFile string, keyless bool, name string) (release.Signer, plugins.Signer, error) {
	if keyless {
		tokens, err := ocisign.GitHubTokenSourceFromEnv()
		if err != nil {
			return nil, plugins.Signer{}, fmt.Errorf("--keyless: %w", err)
		}
		tr, err := cosign.PublicGoodTrustedRoot()
		if err != nil {
			return nil, plugins.Signer{}, err
		}
		s, err := ocisign.NewKeylessSigner(ocisign.KeylessOptions{Tokens: tokens, TrustedRoot: tr})
		if err != nil {
			return nil, plugins.Signer{}, err
		}
		return s, plugins.OpenFiefCI(), nil
	}
	s, err := ocisign.LoadKeySigner(keyFile)
	if err != nil {
		return nil, plugins.Signer{}, fmt.Errorf("--key %s: %w", keyFile, err)
	}
	pub, err := s.PublicKeyPEM()
	if err != nil {
		return nil, plugins.Signer{}, err
	}
	return s, plugins.Signer{Name: name, Kind: plugins.SignerPublisher, Identity: plugins.SignerIdentity{PublicKeyPEM: pub}}, nil
}

// tagRelease is `release tag`: tag every image of a made release with its
// version, by digest (release.TagImages).
func tagRelease(args []string) error {
	fs := flag.NewFlagSet("release tag", flag.ContinueOnError)
	version := fs.String("version", "", "the release's version, whose images are tagged with it (required)")
	dir := fs.String("dir", "", "the release's directory, holding images.json (default <repository>/.cache/release/<version>)")
	insecure := fs.Bool("insecure", false, "read and tag over plain HTTP (loopback registries always are)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("release tag takes no arguments, got %q", fs.Args())
	}
	if *dir == "" {
		root, err := images.FindRoot(".")
		if err != nil {
			return err
		}
		*dir = filepath.Join(root, ".cache", "release", *version)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tagged, err := release.TagImages(ctx, *dir, *version, *insecure, os.Stdout)
	if err != nil {
		return err
	}
	fmt.Printf("tagged %d images of release %s\n", len(tagged), *version)
	return nil
}
