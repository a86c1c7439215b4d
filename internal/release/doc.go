// Package release makes a release of OpenFief (OF-30, docs/images.md): it
// builds the first-party plugins, pushes and signs them, writes the catalog
// that pins their digests to the release's signer, builds the platform's
// images with that catalog linked into the operator, pushes and signs them,
// and writes what a user installs and checks: install.yaml with a
// kustomization around it, plugins.json, images.json, release notes and
// SHA256SUMS. The same commit and version give the same image digests on
// any machine.
package release
