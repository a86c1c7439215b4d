package plugins

// SignPredicateType is the in-toto predicate type of the statement cosign v3
// signs for `cosign sign`. Only statements of this type over an image's
// digest count as its signatures; other attestations by the same signer (an
// SBOM, provenance) over the same digest do not (D-17). The cosign adapter
// requires it and ocisign writes it.
const SignPredicateType = "https://sigstore.dev/cosign/sign/v1"

// SignatureIdentity is who made one signature over an image digest that an
// adapter verified cryptographically. Exactly one form is set: a keyless
// signature's OIDC issuer and certificate subject (from the Fulcio
// certificate), or the PEM public key a key-signed bundle verified with.
type SignatureIdentity struct {
	// Issuer is the OIDC issuer of a keyless signature.
	Issuer string
	// Subject is the certificate subject (SAN) of a keyless signature, such
	// as a CI workflow URL.
	Subject string
	// PublicKeyPEM is the public key, PEM-encoded, of a key signature.
	PublicKeyPEM string
}

// SignedImage is what an adapter found in the registry for one image digest:
// the identities whose signatures over that digest verified, and the manifest
// read from the signed image's io.openfief.plugin.manifest label (nil when the
// image has none, or when nothing verified and the label was not read).
// TrustPolicy.Decide judges it (D-42, D-57).
type SignedImage struct {
	Image      ImageRef
	Signatures []SignatureIdentity
	Manifest   *Manifest
}
