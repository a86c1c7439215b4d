// Package node runs devcluster's real node beside its control plane:
// containerd, the kubelet, kube-proxy (nftables mode) and kube-router's
// firewall, so pods run as containers on a bridge of the node's own and
// NetworkPolicies are enforced; with Options.ClusterDNS CoreDNS too, and
// with Options.Volumes pre-made PersistentVolumes. It needs root and `make
// node`; it keeps its state in StateRoot/<id>, cleans up after itself, and
// after a killed run at the next start ([CleanLeftovers]); [Leftovers] lists
// what is left. See docs/node.md.
//
// A node starts in two halves around the control plane, each a list of
// steps in node.go, one file per step: [Prepare] before it (the lock, the
// state folder, the bridge, the registry, the certificates and the
// configuration, which the API server's flags name), then [Node.Start]
// against the running control plane (containerd, the kubelet, kube-proxy,
// kube-router, the volumes, the cluster DNS). Between the two, the cluster
// configures its API server with [Node.ConfigureAPIServer] and its
// controller manager with [Node.ControllerManagerArgs]. [Node.Stop] undoes
// it all. devcluster's Options{Node: NodeReal} is its one caller.
package node
