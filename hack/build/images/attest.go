package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/ocisign"
)

// attest is `images attest`: sign and attach the SBOM and SLSA provenance
// of every index the last build pushed, with a key file.
func attest(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("images attest", flag.ContinueOnError)
	keyFile := fs.String("key", "", "PEM private key (ECDSA P-256; cosign generate-key-pair or images keygen); COSIGN_PASSWORD unlocks an encrypted one")
	dir := fs.String("dir", "", "build directory (default: the latest build in the cache)")
	cache := fs.String("cache", "", "cache directory (default <repository>/.cache/images)")
	builderID := fs.String("builder-id", images.LocalBuilderID, "the builder the provenance names (runDetails.builder.id)")
	command := fs.String("command", "make images", "the build command the provenance records")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("images attest takes no arguments, got %q", fs.Args())
	}
	if *keyFile == "" {
		return errors.New("--key is required: a PEM private key (see docs/images.md, Attestations)")
	}
	root, err := images.FindRoot(".")
	if err != nil {
		return err
	}
	if *dir == "" {
		if *cache == "" {
			*cache = images.CacheDir(root)
		}
		if *dir, err = images.Latest(*cache); err != nil {
			return err
		}
	}
	rec, err := images.ReadPushRecord(*dir)
	if err != nil {
		return err
	}
	res, err := images.Load(*dir, root)
	if err != nil {
		return err
	}
	signer, err := ocisign.LoadKeySigner(*keyFile)
	if err != nil {
		return fmt.Errorf("--key %s: %w", *keyFile, err)
	}
	att, err := images.Attest(ctx, res, rec.Images, signer, images.Provenance{BuilderID: *builderID, Command: *command}, os.Stdout)
	if err != nil {
		return err
	}
	fmt.Printf("attested %d images (SBOM and SLSA provenance); verify with: cosign verify-attestation --key <public key> --insecure-ignore-tlog=true --type cyclonedx <image>\n", len(att))
	return nil
}
