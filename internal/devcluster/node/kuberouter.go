package node

// startKubeRouter starts kube-router's firewall, the node's NetworkPolicy
// controller; waitForRules waits for its FORWARD chain.
func (n *Node) startKubeRouter() error {
	_, err := n.startProcess(kubeRouterBin, n.kubeRouterArgs()...)
	return err
}

// kubeRouterArgs are kube-router's flags, at start and at
// StartNetworkPolicy: only its firewall (no routing, no service proxy, no
// CNI), IPv4 only, no health or metrics port.
func (n *Node) kubeRouterArgs() []string {
	return []string{
		"--run-firewall=true",
		"--run-router=false",
		"--run-service-proxy=false",
		"--enable-cni=false",
		"--enable-ipv6=false",
		"--kubeconfig=" + n.layout.routerKubeconfig,
		"--hostname-override=" + Name,
		"--service-cluster-ip-range=" + n.net.serviceCIDR,
		"--health-port=0",
		"--metrics-port=0",
	}
}
