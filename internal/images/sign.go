package images

import (
	"context"
	"fmt"
	"io"

	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// Sign signs each pushed index's digest with signer and attaches the
// signature to it in its registry, exactly as `cosign sign --key` (v3)
// does: a Sigstore bundle over an in-toto statement naming the digest, as
// an OCI referrer (ocisign). The operator and `openfief plugin verify`
// accept it from a signer whose public key the owner trusts (D-45). Plain
// HTTP is used only for loopback registries.
func Sign(ctx context.Context, pushed []Pushed, signer *ocisign.KeySigner, progress io.Writer) error {
	for _, p := range pushed {
		ref, err := plugins.ParseImageRef(p.Ref)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		if err := signer.Sign(ctx, ref); err != nil {
			return fmt.Errorf("sign %s: %w", p.Name, err)
		}
		if progress != nil {
			fmt.Fprintf(progress, "signed %s\n", ref)
		}
	}
	return nil
}
