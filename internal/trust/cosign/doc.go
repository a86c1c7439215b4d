// Package cosign finds the Sigstore bundles that cosign v3 attaches to an
// image digest as OCI referrers, verifies them offline with sigstore-go
// against an embedded trust root (or one an administrator installed, which
// TrustRoot.Update verifies through Sigstore's TUF root-rotation chain
// first), and reports who signed the digest together
// with the manifest from the signed image's io.openfief.plugin.manifest label.
//
// It is the registry adapter in front of the pure trust policy: it never
// decides whether a signer is trusted. It reports every identity whose
// signature over the digest verified cryptographically (keyless: the Fulcio
// certificate's OIDC issuer and subject; key: the trusted public key that
// verified), and plugins.TrustPolicy.Decide judges them (D-17, D-42, D-45,
// D-56, D-57).
//
// The outcomes a caller has to tell apart:
//
//   - signed: SignedImage.Signatures is not empty; Manifest is the parsed
//     label, or nil when the image has none;
//   - unsigned: no bundle over the digest verified; Signatures and Manifest
//     are empty and the error is nil. Report says which bundles were skipped
//     and why, and whether a signature in cosign's legacy format (never
//     verified) was found instead;
//   - registry unreachable or refusing: the error wraps
//     ErrRegistryUnavailable (a *RegistryError), never "unsigned", so the
//     operator can set SignatureVerified=Unknown and retry; a 401 or 403
//     (also from the token endpoint) wraps ErrRegistryUnauthorized as well;
//   - signed, but the label does not parse: the error wraps
//     plugins.ErrInvalidLabel and the SignedImage still carries the
//     verified signatures.
package cosign
