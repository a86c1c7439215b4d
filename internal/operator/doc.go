// Package operator is OpenFief's plugin operator (D-10, D-13): controllers
// that turn Plugin and PluginGrant resources in the openfief namespace into
// locked-down workloads, deploying only images a trusted signer signed
// (D-57). It decides nothing itself: it converts the resources with
// internal/apiconv, asks the domain (internal/plugins) which version runs
// and with what, and maps the answer onto Kubernetes objects.
//
// One controller per file, each beside its SetupWithManager:
// plugin_controller.go (PluginReconciler), plugingrant_controller.go
// (GrantReconciler), allowlistpruner_controller.go (AllowListPruner) and
// tokenkeys.go (TokenKeysPublisher, the ServiceAccount token keys, D-59).
// A Plugin reconcile's steps are in files of their own: versioncheck.go
// (the checks), verified.go (the record of what runs), applyplan.go (apply,
// park, tear down, through applyifchanged.go) and status.go (the one status
// write). AddToManager registers them
// all from Options; cmd/operator, devstack and the tests build their
// operator through it and Options.ManagerOptions. The defaults of every
// flag are in options.go. What the manager's cache holds (whole objects
// without managed fields, never a plugin's) is said in cache.go
// (cacheOptions) and cacheintern.go; the objects plugins own are watched as
// metadata only (ownedcache.go) and known by what the operator saw of them
// whole (ownedobjects.go, deploymentfacts.go), compared by digest
// (specdigest.go).
package operator
