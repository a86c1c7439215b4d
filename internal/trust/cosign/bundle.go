package cosign

import (
	"crypto"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// bundleVerifier checks one Sigstore bundle, offline, as a signature over
// one image digest, and says who made it. It holds one sigstore-go verifier
// for keyless bundles and one per trusted public key.
type bundleVerifier struct {
	keyless       *verify.Verifier
	keys          []keyVerifier
	predicateType string
}

// keyVerifier verifies key-signed bundles with one trusted public key.
type keyVerifier struct {
	pem string
	v   *verify.Verifier
}

// newBundleVerifier builds the verifiers. Keyless bundles must carry a
// Fulcio certificate chaining to tm, at least one transparency-log entry
// verified against tm's logs, and at least one observer timestamp (a TSA
// timestamp or a Rekor v1 integrated time) at which the certificate was
// valid; with requireSCT also an SCT from one of tm's CT logs. Key-signed
// bundles need only the key's signature: no transparency log and no
// timestamp, as for `cosign sign --key --tlog-upload=false`, because the
// owner who trusts the key controls it and verification stays offline
// (D-56); a tlog entry in such a bundle is not checked.
func newBundleVerifier(tm root.TrustedMaterial, requireSCT bool, publicKeyPEMs []string, predicateType string) (*bundleVerifier, error) {
	opts := []verify.VerifierOption{
		verify.WithTransparencyLog(1),
		verify.WithObserverTimestamps(1),
		verify.WithoutStatementPredicate(),
	}
	if requireSCT {
		opts = append(opts, verify.WithSignedCertificateTimestamps(1))
	}
	keyless, err := verify.NewVerifier(tm, opts...)
	if err != nil {
		return nil, fmt.Errorf("keyless verifier: %w", err)
	}
	bv := &bundleVerifier{keyless: keyless, predicateType: predicateType}
	for i, pemText := range publicKeyPEMs {
		kv, err := newKeyVerifier(pemText)
		if err != nil {
			return nil, fmt.Errorf("public key %d: %w", i, err)
		}
		bv.keys = append(bv.keys, kv)
	}
	return bv, nil
}

func newKeyVerifier(pemText string) (keyVerifier, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey([]byte(pemText))
	if err != nil {
		return keyVerifier{}, fmt.Errorf("parse PEM public key: %w", err)
	}
	// LoadDefaultVerifier picks the algorithm sigstore uses for the key type:
	// ECDSA with the curve's hash, Ed25519, RSA PKCS#1 v1.5 with SHA-256.
	sv, err := signature.LoadDefaultVerifier(pub)
	if err != nil {
		return keyVerifier{}, fmt.Errorf("load public key: %w", err)
	}
	key := root.NewExpiringKey(sv, time.Time{}, time.Time{})
	tm := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
		// The bundle's key hint is only a hint: this verifier tries its one key.
		return key, nil
	})
	v, err := verify.NewVerifier(tm, verify.WithNoObserverTimestamps(), verify.WithoutStatementPredicate())
	if err != nil {
		return keyVerifier{}, fmt.Errorf("key verifier: %w", err)
	}
	return keyVerifier{pem: pemText, v: v}, nil
}

// verify parses raw as a Sigstore bundle (v0.3 or later) and verifies it,
// offline, as a cosign signature over digest ("sha256:<64 hex>"): the
// signature, the certificate chain or trusted key, the transparency-log
// proof and timestamps for keyless bundles, that the in-toto statement's
// subject holds digest, and that its predicate type is the cosign signature
// type. It returns the signer: issuer and subject from a Fulcio
// certificate, or the PEM of the trusted key that verified. Errors wrap
// ErrMalformedBundle, ErrUnverifiedBundle or ErrPredicateType.
func (bv *bundleVerifier) verify(raw []byte, digest string) (plugins.SignatureIdentity, error) {
	id, _, err := bv.verifyAs(raw, digest, bv.predicateType)
	return id, err
}

// verifyAs is verify for a statement of predicateType. It also returns the
// bundle, whose DSSE payload is the statement that verified.
func (bv *bundleVerifier) verifyAs(raw []byte, digest, predicateType string) (plugins.SignatureIdentity, *bundle.Bundle, error) {
	hexDigest, ok := strings.CutPrefix(digest, "sha256:")
	if !ok {
		return plugins.SignatureIdentity{}, nil, fmt.Errorf("digest %q is not sha256", digest)
	}
	sum, err := hex.DecodeString(hexDigest)
	if err != nil || len(sum) != crypto.SHA256.Size() {
		return plugins.SignatureIdentity{}, nil, fmt.Errorf("digest %q is not 64 hex digits", digest)
	}

	var b bundle.Bundle
	if err := b.UnmarshalJSON(raw); err != nil {
		return plugins.SignatureIdentity{}, nil, fmt.Errorf("%w: %w", ErrMalformedBundle, err)
	}
	if !b.MinVersion("v0.3") {
		return plugins.SignatureIdentity{}, nil, fmt.Errorf("%w: bundle older than v0.3", ErrMalformedBundle)
	}
	vc, err := b.VerificationContent()
	if err != nil {
		return plugins.SignatureIdentity{}, nil, fmt.Errorf("%w: %w", ErrMalformedBundle, err)
	}
	// A statement of another type would be refused once verified; its
	// signature covers the type, so refusing it first gives the same answer
	// and keeps an attestation signed by someone not trusted here from
	// reading as a signature that did not verify.
	if claimed, ok := claimedPredicateType(&b); ok && claimed != predicateType {
		return plugins.SignatureIdentity{}, nil, fmt.Errorf("%w: predicate type %.200q, want %q", ErrPredicateType, claimed, predicateType)
	}
	artifact := verify.WithArtifactDigest("sha256", sum)

	switch {
	case vc.Certificate() != nil:
		res, err := bv.keyless.Verify(&b, verify.NewPolicy(artifact, verify.WithoutIdentitiesUnsafe()))
		if err != nil {
			return plugins.SignatureIdentity{}, nil, fmt.Errorf("%w: %w", ErrUnverifiedBundle, err)
		}
		if err := checkStatement(res, predicateType); err != nil {
			return plugins.SignatureIdentity{}, nil, err
		}
		// The identity is reported, not matched: TrustPolicy.Decide judges it.
		cert := res.Signature.Certificate
		if cert == nil || cert.Extensions.Issuer == "" || cert.SubjectAlternativeName == "" {
			return plugins.SignatureIdentity{}, nil, fmt.Errorf("%w: certificate names no OIDC issuer or subject", ErrUnverifiedBundle)
		}
		return plugins.SignatureIdentity{Issuer: cert.Extensions.Issuer, Subject: cert.SubjectAlternativeName}, &b, nil

	case vc.PublicKey() != nil:
		if len(bv.keys) == 0 {
			return plugins.SignatureIdentity{}, nil, fmt.Errorf("%w: signed with a key, and no public key is trusted", ErrUnverifiedBundle)
		}
		var errs []error
		for _, k := range bv.keys {
			res, err := k.v.Verify(&b, verify.NewPolicy(artifact, verify.WithKey()))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if err := checkStatement(res, predicateType); err != nil {
				return plugins.SignatureIdentity{}, nil, err
			}
			return plugins.SignatureIdentity{PublicKeyPEM: k.pem}, &b, nil
		}
		return plugins.SignatureIdentity{}, nil, fmt.Errorf("%w: none of %d trusted public keys verified it: %w", ErrUnverifiedBundle, len(bv.keys), errors.Join(errs...))

	default:
		return plugins.SignatureIdentity{}, nil, fmt.Errorf("%w: neither a certificate nor a public key", ErrMalformedBundle)
	}
}

// claimedPredicateType is the predicate type of the in-toto statement a
// DSSE bundle carries, read before its signature is checked, so only a
// claim; ok is false for a message signature or a payload that is not a
// JSON object naming one, which verification then judges.
func claimedPredicateType(b *bundle.Bundle) (string, bool) {
	env := b.GetDsseEnvelope()
	if env == nil {
		return "", false
	}
	var st struct {
		PredicateType string `json:"predicateType"`
	}
	if err := json.Unmarshal(env.GetPayload(), &st); err != nil || st.PredicateType == "" {
		return "", false
	}
	return st.PredicateType, true
}

// checkStatement requires a DSSE in-toto statement of predicateType (the
// cosign signature type for a signature). sigstore-go's policy checks the
// subject digest, not the predicate type.
func checkStatement(res *verify.VerificationResult, predicateType string) error {
	if res.Statement == nil {
		return fmt.Errorf("%w: a message signature, not an in-toto statement", ErrPredicateType)
	}
	if got := res.Statement.GetPredicateType(); got != predicateType {
		return fmt.Errorf("%w: predicate type %q, want %q", ErrPredicateType, got, predicateType)
	}
	return nil
}
