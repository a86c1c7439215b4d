package node

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// addressing picks the addresses of node id: a free pod /24, its first
// address as the gateway on the bridge of-<id>, and the tenth address of
// the Service range serviceCIDR as the cluster DNS's.
func addressing(id, serviceCIDR string) (nodeNet, error) {
	podCIDR, err := freePodCIDR()
	if err != nil {
		return nodeNet{}, err
	}
	gw := make(net.IP, 4)
	copy(gw, podCIDR.IP.To4())
	gw[3] = 1
	_, svc, err := net.ParseCIDR(serviceCIDR)
	if err != nil {
		return nodeNet{}, fmt.Errorf("devcluster: the Service range: %w", err)
	}
	dns := make(net.IP, 4)
	copy(dns, svc.IP.To4())
	dns[3] = 10
	return nodeNet{bridge: nodePrefix + id, podCIDR: podCIDR, gateway: gw, dns: dns, serviceCIDR: serviceCIDR}, nil
}

// freePodCIDR returns the first 10.244.N.0/24 that overlaps no address of
// this machine's interfaces.
func freePodCIDR() (*net.IPNet, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("devcluster: %w", err)
	}
	for i := range 256 {
		_, cand, _ := net.ParseCIDR(fmt.Sprintf("10.244.%d.0/24", i))
		free := true
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && (cand.Contains(ipn.IP) || ipn.Contains(cand.IP)) {
				free = false
				break
			}
		}
		if free {
			return cand, nil
		}
	}
	return nil, errors.New("devcluster: no free /24 in 10.244.0.0/16 for the pods")
}

// freePort returns a TCP port free on addr.
func freePort(addr string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return 0, fmt.Errorf("devcluster: %w", err)
	}
	defer func() { _ = l.Close() }() // only its port was wanted
	return l.Addr().(*net.TCPAddr).Port, nil
}

// pickPorts picks the kubelet's port on the gateway and kube-proxy's
// healthz and metrics ports on loopback.
func (n *Node) pickPorts() (err error) {
	if n.port, err = freePort(n.net.gateway.String()); err != nil {
		return err
	}
	if n.proxyPorts[0], err = freePort("127.0.0.1"); err != nil {
		return err
	}
	n.proxyPorts[1], err = freePort("127.0.0.1")
	return err
}

// makeBridge creates the node's bridge with the gateway address: the CNI
// bridge plugin attaches the pods to it, and the kubelet and kube-proxy
// listen on that address, so the API server reaches the kubelet without the
// node listening on any outside interface.
func (n *Node) makeBridge() error {
	ones, _ := n.net.podCIDR.Mask.Size()
	for _, args := range [][]string{
		{"link", "add", n.net.bridge, "type", "bridge"},
		{"addr", "add", fmt.Sprintf("%s/%d", n.net.gateway, ones), "dev", n.net.bridge},
		{"link", "set", n.net.bridge, "up"},
	} {
		if _, err := run("ip", args...); err != nil {
			return err
		}
	}
	return nil
}

// makeCgroupRoot creates the kubelet's cgroup root in every hierarchy; a
// v1 cpuset needs its CPUs and memory nodes copied from the parent first.
func makeCgroupRoot(root string) error {
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, root)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("devcluster: cgroup root: %w", err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("devcluster: cgroup root: %w", err)
				}
			}
		}
	}
	return nil
}
