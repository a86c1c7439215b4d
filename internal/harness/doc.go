// Package harness is the conformance harness behind `openfief plugin test`:
// it runs a plugin image the way the platform would, without a cluster, and
// reports per check whether the plugin honours the contract.
//
// Design. The harness plays every part of the platform around one plugin
// instance, each with the project's own code: the operator's rules read the
// manifest label (plugins.ParseManifestLabel) and compile the workload for a
// grant that approves the whole request (plugins.Effective, plugins.Compile),
// which gives the pod's environment, token paths and resources; the signature
// half of the label check is `openfief plugin verify`'s, run by the caller
// (Options.Signature). A cluster's token signer is played by a key of the
// harness's own (tokens.go), published as the openfief-sa-jwks files the SDK
// verifies the core's calls with. The core is played by Connect clients
// that send the core's tokens, and others it would never send, and judge the
// answers with the core's delivery rules (internal/core/store/deliveryrules,
// the batch echo the scheduler checks) and the answer bound of the core's
// caller. The egress proxy is the real one (internal/egress, the handler
// cmd/egress-proxy serves) with the plugin's allow-list and a token reviewer
// that accepts the plugin's egress token; its resolver and dialer are the
// harness's, which record the hosts it let through and answer every one with
// a stand-in that reads the TLS ClientHello and closes. Nothing leaves the
// machine, so a check that needs the institution's answer (a delivery made
// from it, a view's write) is skipped with its reason.
//
// The plugin runs through a Runtime: internal/harness/sandbox on Linux as
// root (the image's root file system as PID 1 of new namespaces, in a
// network namespace with only loopback, where every other packet and DNS
// query is recorded and never answered, and a cgroup with the pod's
// limits), wired in by sandboxrt.go; LocalProcess is a stand-in for tests
// only, which cannot see the network and measures memory from /proc.
//
// The checks run in a fixed order (Checks): label, serves, auth, sync,
// import-file, pages, egress, network, sigterm, resources. Each ends pass,
// fail or skip with a one-line reason; a skip is never a pass. Everything the
// plugin or its image wrote is cleaned before it is shown (display), cut to a
// bound, and the harness keeps only the last 64 KiB of the plugin's output.
//
// What it cannot see: the institution (stand-ins answer its hosts), the
// owner's Secrets (mounted empty) and hosts of the owner's choosing
// (placeholders), the kubelet's refresh of the projected tokens, the
// NetworkPolicy itself (the sandbox's loopback-only namespace stands in for
// it), the core's calls to a plugin after the first few, and anything the
// plugin does only later in its life than a run of the checks.
package harness
