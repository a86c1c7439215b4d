package plugins

// Predicate types of the attestations a release attaches to every image
// index (OF-30), as cosign names them: `cosign verify-attestation --type
// cyclonedx` selects SBOMPredicateType, `--type slsaprovenance1`
// ProvenancePredicateType. Neither counts as a signature.
const (
	// SBOMPredicateType is a CycloneDX SBOM.
	SBOMPredicateType = "https://cyclonedx.org/bom"
	// ProvenancePredicateType is SLSA v1 provenance.
	ProvenancePredicateType = "https://slsa.dev/provenance/v1"
)
