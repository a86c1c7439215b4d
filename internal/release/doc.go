// Package release makes a release of OpenFief (OF-30, docs/images.md): it
// builds the first-party plugins, pushes and signs them, writes the catalog
// that pins their digests to the release's signer, builds the platform's
// images with that catalog linked into the operator, pushes and signs them,
// builds the openfief CLI with the catalog, the version and the check probe
// linked in, and writes what a user installs and checks: install.yaml with a
// kustomization around it, plugins.json and its signature
// (plugins.json.sigstore.json), the CLI binaries, images.json, release notes
// and SHA256SUMS. The same commit and version give the same image digests on
// any machine.
package release
