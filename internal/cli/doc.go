// Package cli is the owner's command line, openfief (D-46): it previews the
// operator's signature check, installs and upgrades plugins from their signed
// manifest label, approves and revokes grants, shows status and uninstalls
// (D-58). It works against the current kubeconfig context like kubectl, and
// decides nothing the domain package does not: trust comes from
// plugins.TrustPolicy through the operator's PolicyVerifier, pending approval
// from plugins.NeedsApproval, config checks from configschema.Validate.
//
// Commands write to injectable streams and return an *ExitError whose Code is
// one of the documented exit codes (docs/cli.md), so tests run them
// in-process.
package cli
