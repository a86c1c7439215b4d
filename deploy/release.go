package deploy

// ReleaseConfigMap is the ConfigMap, in the openfief namespace, that a
// release overlay writes beside the platform (images.WritePlatformOverlay):
// what the installed release ships besides its Deployments, so the CLI finds
// it without flags (OF-29). It carries the release's version label like
// every other object of the overlay.
const ReleaseConfigMap = "openfief-release"

// ReleaseKeyCheckProbe is ReleaseConfigMap's key holding the check probe
// image of the release, <repository>@sha256:<hex>, which `openfief check
// --isolation` runs as two Plugins (OF-29).
const ReleaseKeyCheckProbe = "check-probe"

// ReleaseKeyCatalog is ReleaseConfigMap's key holding the catalog a release
// linked into its operator (plugins.json, OF-30), which `openfief catalog
// list` and `openfief plugin install --catalog` read. The operator never
// reads it: editing it cannot make an image Verified.
const ReleaseKeyCatalog = "catalog"
