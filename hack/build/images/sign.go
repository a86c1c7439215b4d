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

// sign is `images sign`: sign every index the build pushed with a key file.
func sign(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("images sign", flag.ContinueOnError)
	keyFile := fs.String("key", "", "PEM private key (ECDSA P-256; cosign generate-key-pair or images keygen); COSIGN_PASSWORD unlocks an encrypted one")
	dir := fs.String("dir", "", "build directory (default: the latest build in the cache)")
	cache := fs.String("cache", "", "cache directory (default <repository>/.cache/images)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *keyFile == "" {
		return errors.New("--key is required: a PEM private key (see docs/images.md, Signing)")
	}
	if *dir == "" {
		root, err := images.FindRoot(".")
		if err != nil {
			return err
		}
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
	signer, err := ocisign.LoadKeySigner(*keyFile)
	if err != nil {
		return fmt.Errorf("--key %s: %w", *keyFile, err)
	}
	if err := images.Sign(ctx, rec.Images, signer, os.Stdout); err != nil {
		return err
	}
	pub, err := signer.PublicKeyPEM()
	if err != nil {
		return err
	}
	fmt.Printf("signed %d images; their signer's public key, for an owner's signers.json:\n%s", len(rec.Images), pub)
	return nil
}
