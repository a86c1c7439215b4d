package cosign

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// VerifyFile verifies raw, a Sigstore bundle kept beside a file (as `cosign
// attest-blob --bundle` writes one), as a signed in-toto statement of
// predicateType whose one subject is the SHA-256 of file, offline, with
// the trust material of signatures: the embedded trusted root for keyless
// bundles (or WithTrustedMaterial's) and WithPublicKeys' keys; the other
// options are ignored. It returns who signed it and the statement's
// predicate. Whether that signer is trusted for the file is the caller's
// decision, as for images. A release signs its catalog this way (OF-30).
// Errors wrap ErrMalformedBundle, ErrUnverifiedBundle, ErrPredicateType or
// ErrMalformedStatement; a bundle over a changed file does not verify.
func VerifyFile(raw, file []byte, predicateType string, opts ...Option) (plugins.SignatureIdentity, json.RawMessage, error) {
	if predicateType == "" {
		return plugins.SignatureIdentity{}, nil, fmt.Errorf("verify a file's bundle: no predicate type")
	}
	if len(raw) > MaxBundleBytes {
		return plugins.SignatureIdentity{}, nil, fmt.Errorf("%w: longer than %d bytes", ErrMalformedBundle, MaxBundleBytes)
	}
	o := options{requireSCT: true}
	for _, opt := range opts {
		opt(&o)
	}
	if o.trusted == nil {
		tr, err := PublicGoodTrustedRoot()
		if err != nil {
			return plugins.SignatureIdentity{}, nil, err
		}
		o.trusted = tr
	}
	bv, err := newBundleVerifier(o.trusted, o.requireSCT, o.publicKeys, predicateType)
	if err != nil {
		return plugins.SignatureIdentity{}, nil, err
	}
	sum := sha256.Sum256(file)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	id, b, err := bv.verifyAs(raw, digest, predicateType)
	if err != nil {
		return plugins.SignatureIdentity{}, nil, err
	}
	pred, err := ParseStatement(b.GetDsseEnvelope().GetPayload(), digest, predicateType)
	if err != nil {
		return plugins.SignatureIdentity{}, nil, err
	}
	return id, pred, nil
}
