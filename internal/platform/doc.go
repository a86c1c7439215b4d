// Package platform installs, upgrades, inspects and removes the OpenFief
// platform on a cluster from a release overlay, for `openfief platform`
// (docs/cli.md, docs/operator.md, OF-23): it renders the overlay with the
// kustomize API, labels every object as its own, fills in the API server's
// addresses, server-side applies the objects under its own field manager
// (CRDs first, Established before the rest), waits for every platform
// Deployment to be Available, prunes what a newer overlay no longer holds
// and, on uninstall, removes the platform and every plugin workload the
// operator made.
package platform
