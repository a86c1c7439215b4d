package ocisign

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// BundleSigner signs an in-toto statement into a Sigstore bundle (JSON). A
// KeySigner is one; a keyless signer (a Fulcio certificate for an OIDC
// identity) is another shape of the same method, so attestations need no
// change to be signed keylessly.
type BundleSigner interface {
	Bundle(ctx context.Context, statement []byte) ([]byte, error)
}

var _ BundleSigner = (*KeySigner)(nil)

// MaxPredicateBytes bounds a predicate this package signs: base64 in a DSSE
// envelope, it keeps the bundle under the 1 MiB a verifier reads
// (internal/trust/cosign.MaxBundleBytes). An SBOM of a Go binary is tens of
// kilobytes.
const MaxPredicateBytes = 512 << 10

// StatementWith is the in-toto v1 statement about an image digest
// ("sha256:<hex>") with predicateType and predicate, which must be one JSON
// object. The statement's keys are sorted and the predicate compacted, so
// the same predicate gives the same bytes.
func StatementWith(digest, predicateType string, predicate []byte) ([]byte, error) {
	h, ok := strings.CutPrefix(digest, "sha256:")
	if b, err := hex.DecodeString(h); !ok || err != nil || len(b) != 32 {
		return nil, fmt.Errorf("digest %q is not sha256", digest)
	}
	if predicateType == "" {
		return nil, errors.New("predicate type: required")
	}
	if len(predicate) > MaxPredicateBytes {
		return nil, fmt.Errorf("predicate of %d bytes is over the %d-byte cap", len(predicate), MaxPredicateBytes)
	}
	trimmed := bytes.TrimSpace(predicate)
	if !json.Valid(trimmed) || len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, errors.New("predicate: not one JSON object")
	}
	return json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"digest": map[string]string{"sha256": h}}},
		"predicateType": predicateType,
		"predicate":     json.RawMessage(trimmed),
	})
}

// Attest signs predicate, of predicateType, about ref's digest with signer
// and attaches the bundle to ref as a referrer, as `cosign attest --type T
// --new-bundle-format` (v3) stores it: the referrer's
// dev.sigstore.bundle.predicateType annotation is the predicate type, which
// `cosign verify-attestation --type` selects on. It returns the referrer
// manifest's digest. Signatures keep their own path (KeySigner.Sign).
func Attest(ctx context.Context, signer BundleSigner, ref plugins.ImageRef, predicateType string, predicate []byte) (v1.Hash, error) {
	if signer == nil {
		return v1.Hash{}, errors.New("attest: no signer")
	}
	if predicateType == plugins.SignPredicateType {
		return v1.Hash{}, errors.New("attest: the signature predicate type is not an attestation")
	}
	stmt, err := StatementWith(ref.Digest(), predicateType, predicate)
	if err != nil {
		return v1.Hash{}, err
	}
	bundle, err := signer.Bundle(ctx, stmt)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("attest %s: %w", ref, err)
	}
	return Attach(ctx, ref, bundle, predicateType)
}
