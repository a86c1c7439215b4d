package node

import "context"

// startKubelet starts the kubelet, which registers the node, and waits
// until the node is Ready and the controller manager has done its first
// work.
func (n *Node) startKubelet(ctx context.Context) error {
	l := n.layout
	if _, err := n.startProcess(kubeletBin,
		"--config="+l.kubeletConfig,
		"--kubeconfig="+l.kubeletKubeconfig,
		"--root-dir="+l.kubeletRoot,
		"--cert-dir="+l.kubeletCerts,
		"--hostname-override="+Name,
		"--node-ip="+n.net.gateway.String(),
	); err != nil {
		return err
	}
	return n.waitFor(ctx, "the real node to become Ready", func(ctx context.Context) (bool, error) {
		return n.cp.Ready(ctx, Name)
	})
}
