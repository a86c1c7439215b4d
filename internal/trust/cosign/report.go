package cosign

// Report says what a verification looked at besides the identities it
// returns: how many referrers it considered and which bundles it skipped,
// so the operator can explain an unsigned or untrusted result.
type Report struct {
	// Referrers is how many referrers of the digest were listed.
	Referrers int
	// Ignored is how many of them were not Sigstore bundles (other
	// artifacts attached to the image) and were passed over silently.
	Ignored int
	// Verified is how many bundles verified as signatures over the digest;
	// Signatures may hold fewer when one signer signed twice.
	Verified int
	// Skipped lists the bundles that did not count, in the order read.
	Skipped []Skipped
	// LegacySignature is true when the digest carries a signature in
	// cosign's legacy format (simple signing, written by cosign sign
	// --new-bundle-format=false): a referrer of that artifact type, or,
	// looked for only when no bundle verified, the sha256-<hex>.sig tag.
	// Such a signature is never verified; it is reported so a refusal can
	// say how to sign again.
	LegacySignature bool
}

// Skipped is one bundle that did not count as a signature.
type Skipped struct {
	// Referrer is the digest of the referrer manifest that carried it.
	Referrer string
	// Reason wraps ErrMalformedBundle, ErrUnverifiedBundle,
	// ErrPredicateType or ErrTooManyReferrers.
	Reason error
}
