// Package ocisign builds plugin images and signs them the way cosign v3 does,
// without Docker or cosign: an OCI image whose config carries the
// io.openfief.plugin.manifest label (D-42), and a Sigstore bundle over its
// digest stored as an OCI referrer (D-17). The local mode (`openfief dev`),
// the demo and the tests use it to give the operator real signatures to
// verify, `make sign` and `make release` sign with a key file (KeySigner),
// and the release workflow signs keyless as OpenFief's CI (KeylessSigner,
// with GitHubTokenSource's OIDC token).
package ocisign
