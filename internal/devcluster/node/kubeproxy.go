package node

// startKubeProxy starts kube-proxy in nftables mode (kubeProxyConfigYAML);
// waitForRules waits for its table.
func (n *Node) startKubeProxy() error {
	_, err := n.startProcess(kubeProxyBin, "--config="+n.layout.proxyConfig)
	return err
}
