package node

import (
	"context"
	"net"
)

// startContainerd starts containerd with the node's configuration and waits
// until its socket answers.
func (n *Node) startContainerd(ctx context.Context) error {
	if _, err := n.startProcess(containerdBin, "--config", n.layout.containerdConfig); err != nil {
		return err
	}
	return n.waitFor(ctx, "containerd", func(context.Context) (bool, error) {
		return n.containerdServes(), nil
	})
}

// containerdServes reports whether containerd's socket takes a connection.
func (n *Node) containerdServes() bool {
	conn, err := net.Dial("unix", n.layout.containerdSocket)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}
