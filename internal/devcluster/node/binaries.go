package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/arkadiuss/openfief/internal/devcluster/proc"
)

// Names of the files `make node` links into the binary directory.
const (
	containerdBin = "containerd"
	shimBin       = "containerd-shim-runc-v2"
	kubeletBin    = "kubelet"
	kubeProxyBin  = "kube-proxy"
	kubeRouterBin = "kube-router"
	pauseBin      = "pause"
)

// The CNI plugins the node's network uses, from Debian's
// containernetworking-plugins.
var cniPlugins = []string{"bridge", "host-local", "portmap", "loopback"}

// debianCNIDir is where Debian installs the CNI plugins.
const debianCNIDir = "/usr/lib/cni"

// requireBinaries checks the node's binaries, host tools and CNI plugins,
// and CoreDNS with Options.ClusterDNS.
func requireBinaries(opts Options) error {
	if err := requireNodeFiles(opts.BinDir); err != nil {
		return err
	}
	if opts.ClusterDNS {
		if err := proc.Require(opts.BinDir, corednsBin); err != nil {
			return fmt.Errorf("%w (CoreDNS is built by `make node`)", err)
		}
	}
	return nil
}

// requireNodeFiles checks the node's binaries, host tools and CNI plugins.
func requireNodeFiles(binDir string) error {
	if err := proc.Require(binDir, containerdBin, shimBin, kubeletBin, kubeProxyBin, kubeRouterBin, pauseBin); err != nil {
		return fmt.Errorf("%w (the node's are built by `make node`)", err)
	}
	var missing []string
	for _, tool := range []string{"runc", "iptables", "ip6tables", "ipset", "nft", "ip", "conntrack"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	for _, p := range cniPlugins {
		if _, err := os.Stat(filepath.Join(debianCNIDir, p)); err != nil {
			missing = append(missing, filepath.Join(debianCNIDir, p))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("devcluster: %v missing: run `make node` (it installs them from Debian): %w", missing, proc.ErrMissingBinaries)
	}
	return nil
}
