package v1alpha1

// Condition types of a Plugin and a PluginGrant.
const (
	// ConditionReady says whether a version of the plugin runs, and if not why.
	ConditionReady = "Ready"
	// ConditionSignatureVerified says whether the current spec's image was
	// signed by a trusted signer and its signed manifest matches.
	// ---
	// Decisions: D-56, D-57.
	ConditionSignatureVerified = "SignatureVerified"
	// ConditionApprovalRequired says whether the spec requests more than the grant.
	ConditionApprovalRequired = "ApprovalRequired"
	// ConditionValid says whether a PluginGrant passes validation.
	ConditionValid = "Valid"
)

// Ready reasons, in the order the operator looks for a first cause.
const (
	ReasonRunning                = "Running"
	ReasonRunningPreviousVersion = "RunningPreviousVersion"
	ReasonProgressing            = "Progressing"
	ReasonNoGrant                = "NoGrant"
	ReasonInvalidGrant           = "InvalidGrant"
	ReasonInvalidPreviousVersion = "InvalidPreviousVersion"
	ReasonClusterUnavailable     = "ClusterUnavailable"
	ReasonAwaitingApproval       = "AwaitingApproval"
	ReasonNothingGranted         = "NothingGranted"
	ReasonInvalidSpec            = "InvalidSpec"
	ReasonInvalidConfig          = "InvalidConfig"
	ReasonSignatureNotVerified   = "SignatureNotVerified"
)

// SignatureVerified reasons.
// ---
// Decisions: D-56.
const (
	// ReasonVerified: a catalog entry pins the digest and its publisher signed it.
	ReasonVerified = "Verified"
	// ReasonSignedByTrustedSigner: a trusted signer signed it; not in the catalog.
	ReasonSignedByTrustedSigner = "SignedByTrustedSigner"
	ReasonUnsigned              = "Unsigned"
	ReasonUntrustedSigner       = "UntrustedSigner"
	ReasonManifestMismatch      = "ManifestMismatch"
	ReasonInvalidImage          = "InvalidImage"
	// ReasonRegistryUnavailable (SignatureVerified=Unknown): the registry
	// could not be read (unreachable, timed out, failing), so whether the
	// image is signed is unknown; retried. A version the operator verified
	// keeps running (fail static); nothing new deploys.
	// ---
	// Decisions: OF-2.
	ReasonRegistryUnavailable = "RegistryUnavailable"
	// ReasonRegistryUnauthorized (SignatureVerified=Unknown): the registry
	// refused the read with 401 Unauthorized or 403 Forbidden (also from its
	// token endpoint): the image is private or the reader has no access.
	// Handled as RegistryUnavailable (retried, fail static, nothing new
	// deploys); only the reason tells "no access" from "down".
	ReasonRegistryUnauthorized = "RegistryUnauthorized"
)

// ApprovalRequired reasons.
const (
	ReasonPermissionsPending = "PermissionsPending"
	ReasonNothingPending     = "NothingPending"
)

// Valid reasons of a PluginGrant.
const (
	ReasonValid   = "Valid"
	ReasonInvalid = "Invalid"
)
