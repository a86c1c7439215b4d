// Package devcluster starts a real Kubernetes control plane on loopback for
// tests and local use, from the binaries `make controlplane` builds into
// .bin/ (see hack/build/controlplane.sh).
//
// Two modes are offered:
//
//   - Minimal runs etcd and kube-apiserver through controller-runtime's envtest.
//     The API server has a ServiceAccount issuer and signing key, so
//     TokenRequest, TokenReview and the OIDC discovery endpoints work, and the
//     PodSecurity admission plugin is on.
//   - Full adds kube-controller-manager (all default controllers: Deployments,
//     ReplicaSets, the garbage collector, ServiceAccounts, the root CA
//     publisher, ...), kube-scheduler and kwok, which plays the kubelets of
//     one or more fake nodes, so Pods are scheduled and become Running and
//     Ready, and Deployments become Available. kwok renews a node lease for
//     each fake node, as a kubelet does, and makes a pod Ready again when
//     the node lifecycle controller marked it not Ready (a fake node that
//     missed its heartbeats while the API server was away). kwok keeps no
//     state of its own, so a kwok that crashes is started again (at most
//     three times a minute, noted in its log) with its node leases released
//     for it: kwok v0.8.0 can die of a data race in its CEL library as its
//     controllers start.
//
// In Full mode, Options.Node = NodeReal replaces kwok with one real node:
// containerd, the kubelet, kube-proxy (nftables mode) and kube-router's
// firewall, so pods run as containers on a bridge of the node's own and
// NetworkPolicies are enforced. It needs root and `make node`; it keeps its
// state in /run/openfief-node/<id> and cleans up after itself, and after a
// killed run at the next start ([CleanNodeLeftovers]); [NodeLeftovers] lists
// what is left. Package node (internal/devcluster/node) runs it; the
// Cluster's node methods call it. See docs/node.md.
//
// Every process runs in its own process group on random free ports, with all
// state in one temporary directory. Stop ends them all and removes the
// directory; a watchdog process does the same if the starting process dies
// without calling Stop (a test timeout, a kill), so no etcd is left behind.
//
// Starting takes about 3 s in either mode on a two-core machine (median of 5:
// minimal 2.9 s, full 3.1 s; `go test -tags cluster -run '^$' -bench Start -benchtime 5x`).
// Test packages still share one control plane per mode and kind of node
// through [Main] and [Shared]:
//
//	func TestMain(m *testing.M) { os.Exit(devcluster.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		c := devcluster.Shared(t, devcluster.Options{Mode: devcluster.Full})
//		...
//	}
package devcluster
