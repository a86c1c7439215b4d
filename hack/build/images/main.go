// Command images builds, pushes and signs OpenFief's container images from
// source, without Docker (internal/images, docs/images.md):
//
//	go run ./hack/build/images build [--push PREFIX] [--platform P,...] [--image NAME,...] [--insecure]
//	go run ./hack/build/images sign --key FILE [--dir DIR]
//	go run ./hack/build/images attest --key FILE [--dir DIR] [--builder-id URI] [--command CMD]
//	go run ./hack/build/images keygen [--out PREFIX] [--name NAME]
//	go run ./hack/build/images build-ts [--push PREFIX] [--platform P,...] [--insecure]
//
// build writes an OCI layout to .cache/images/<revision> and, with --push,
// sends every image index to PREFIX/openfief/<name> (make images
// REGISTRY=...). sign signs what the last build pushed (make sign); attest
// attaches its signed SBOM and SLSA provenance (make attest). keygen
// makes a cosign-compatible key pair. The private key is never printed.
// build-ts builds the TypeScript SDK's example connector's image
// (docs/sdk-typescript.md) into .cache/images/fx-rates-ts; with
// --push, sign --dir that folder signs it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

const usage = `usage:
  images build [--push PREFIX] [--platform linux/amd64,linux/arm64] [--image NAME,...] [--insecure] [--cache DIR]
  images sign --key FILE [--dir DIR] [--cache DIR]
  images attest --key FILE [--dir DIR] [--cache DIR] [--builder-id URI] [--command CMD]
  images keygen [--out PREFIX] [--name NAME]
  images build-ts [--push PREFIX] [--platform linux/amd64,linux/arm64] [--insecure] [--cache DIR]`

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("no command\n%s", usage)
	}
	switch args[0] {
	case "build":
		return build(ctx, args[1:])
	case "sign":
		return sign(ctx, args[1:])
	case "attest":
		return attest(ctx, args[1:])
	case "keygen":
		return keygen(args[1:])
	case "build-ts":
		return buildTS(ctx, args[1:])
	default:
		return fmt.Errorf("unknown command %q\n%s", args[0], usage)
	}
}
