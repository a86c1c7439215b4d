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

// CatalogPredicateType is the predicate type of a release's signature over
// its catalog file, plugins.json (OF-30): an in-toto statement whose one
// subject is the file's SHA-256, signed by the release's publisher. The
// predicate names the release's version. The CLI uses a catalog file only
// when such a signature verifies (`--catalog-file`).
const CatalogPredicateType = "https://github.com/arkadiuss/openfief/catalog/v1"

// CatalogSignatureSuffix names a catalog file's signature beside it: a
// release writes plugins.json's as plugins.json.sigstore.json, the name
// cosign's --bundle examples use.
const CatalogSignatureSuffix = ".sigstore.json"
