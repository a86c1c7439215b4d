package netpolicy

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
)

// Role names one end of a cell: a pod or an address of the platform.
type Role string

// The roles of the truth table. Plugin is the plugin under test, with egress
// granted; OtherPlugin is a second plugin instance without egress.
const (
	// Plugin is a plugin pod whose grant includes an egress host.
	Plugin Role = "plugin"
	// OtherPlugin is a second plugin's pod, granted no egress.
	OtherPlugin Role = "other-plugin"
	// Core is a pod the core's Service selects (the only caller, D-59).
	Core Role = "core"
	// EgressProxy is an egress proxy pod (the only way out, D-32).
	EgressProxy Role = "egress-proxy"
	// NamespacePod is a pod in the openfief namespace that is neither the
	// core nor a plugin (the operator's pod, say).
	NamespacePod Role = "openfief-pod"
	// CoreLookalike is a pod labelled like the core, in another namespace.
	CoreLookalike Role = "core-lookalike"
	// ClusterDNS is a cluster DNS pod (kube-system, k8s-app=kube-dns): what
	// the cluster DNS Service address leads to.
	ClusterDNS Role = "cluster-dns"
	// NodeResolver is a DNS resolver on the node, an address that is no pod.
	NodeResolver Role = "node-resolver"
	// APIServer is the Kubernetes API server's address, no pod.
	APIServer Role = "api-server"
	// NBPStandIn stands in for an outside API (api.nbp.pl) on an address the
	// node routes to, no pod; private, as on a test node.
	NBPStandIn Role = "nbp-stand-in"
	// Internet is a public address outside the cluster.
	Internet Role = "internet"
)

// Peer is one role's concrete end: a pod (namespace, its labels and the
// namespace's labels) or, when PodLabels is nil, an address outside every
// pod. IP is used by ipBlock rules either way.
type Peer struct {
	Namespace       string
	NamespaceLabels map[string]string
	PodLabels       map[string]string
	IP              string
}

// IsPod reports whether the peer is a pod, so pod selectors can match it.
func (p Peer) IsPod() bool { return p.PodLabels != nil }

// PodPeer is the Peer of a pod in namespace ns.
func PodPeer(pod *corev1.Pod, ns *corev1.Namespace) Peer {
	labels := maps.Clone(pod.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	return Peer{Namespace: ns.Name, NamespaceLabels: maps.Clone(ns.Labels), PodLabels: labels, IP: pod.Status.PodIP}
}

// AddressPeer is the Peer of an address that is no pod.
func AddressPeer(ip string) Peer { return Peer{IP: ip} }

// Ports are the ports the cells use that differ per installation: the pod
// ports NetworkPolicy matches, not Service ports.
type Ports struct {
	// Plugin is the port plugins serve the core on.
	Plugin int
	// Core is the core's pod port plugins call.
	Core int
	// CoreOwner is the core's pod port of the owner API, which only the
	// API server's service proxy may reach (OF-18, OF-19).
	CoreOwner int
	// Proxy is the egress proxy's pod port.
	Proxy int
	// APIServer is the API server's port.
	APIServer int
	// NBPStandIn is the port the outside API's stand-in listens on.
	NBPStandIn int
}

// World is where the cells run: a Peer for every Role and the ports.
type World struct {
	Peers map[Role]Peer
	Ports Ports
}
