package deploy

// ReleaseConfigMap is the ConfigMap, in the openfief namespace, that a
// release overlay writes beside the platform (overlay.WritePlatform):
// what the installed release built besides its Deployments, for people and
// tools to read. It carries the release's version label like every other
// object of the overlay. Nothing trusts it: anyone who may write ConfigMaps
// in the namespace can change it, so the CLI takes the catalog and the check
// probe from its own binary, as the operator takes the catalog from its own
// (OF-29, OF-30).
const ReleaseConfigMap = "openfief-release"

// ReleaseKeyCheckProbe is ReleaseConfigMap's key naming the check probe
// image the release built, <repository>@sha256:<hex>. It is informational:
// `openfief check --isolation` runs the probe its own release pins, or
// --probe-image (OF-29).
const ReleaseKeyCheckProbe = "check-probe"
