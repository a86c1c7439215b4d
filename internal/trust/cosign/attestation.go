package cosign

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// Attestation is one attestation of an image digest that verified.
type Attestation struct {
	// Referrer is the digest of the referrer manifest that carried it.
	Referrer string
	// Signer is who signed it, as for a signature: a keyless identity or
	// the trusted public key that verified it.
	Signer plugins.SignatureIdentity
	// PredicateType is the statement's predicate type.
	PredicateType string
	// Predicate is the statement's predicate, a JSON object of at most
	// MaxBundleBytes.
	Predicate json.RawMessage
}

// VerifyAttestations finds the attestations of predicateType attached to
// ref's digest (plugins.SBOMPredicateType, plugins.ProvenancePredicateType,
// or any other) and verifies each offline with the trust material of
// signatures: the trusted root for keyless bundles and the trusted public
// keys. It returns every one that verified, in the order listed, with its
// signer and predicate; whether the signer is trusted for anything is the
// caller's decision, as for signatures.
//
// Each bundle's in-toto statement is parsed strictly (ParseStatement): its
// only subject must be exactly ref's digest. A bundle of another predicate
// type (a signature, the other attestation) is skipped with a reason
// wrapping ErrPredicateType; one that does not verify or whose statement is
// refused is skipped too, and reported. Registry errors are as for Verify.
func (v *Verifier) VerifyAttestations(ctx context.Context, ref plugins.ImageRef, predicateType string) ([]Attestation, Report, error) {
	if predicateType == "" {
		return nil, Report{}, fmt.Errorf("attestations of %s: no predicate type", ref)
	}
	ctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	d, p, err := v.open(ref)
	if err != nil {
		return nil, Report{}, err
	}
	found, rep, err := listBundles(ctx, p, d)
	if err != nil {
		return nil, rep, err
	}
	var out []Attestation
	for _, f := range found {
		id, b, err := v.bundles.verifyAs(f.raw, ref.Digest(), predicateType)
		if err != nil {
			rep.Skipped = append(rep.Skipped, Skipped{Referrer: f.referrer, Reason: err})
			continue
		}
		pred, err := ParseStatement(b.GetDsseEnvelope().GetPayload(), ref.Digest(), predicateType)
		if err != nil {
			rep.Skipped = append(rep.Skipped, Skipped{Referrer: f.referrer, Reason: err})
			continue
		}
		rep.Verified++
		out = append(out, Attestation{Referrer: f.referrer, Signer: id, PredicateType: predicateType, Predicate: pred})
	}
	return out, rep, nil
}
