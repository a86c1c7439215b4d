package devcluster

import (
	"context"
	"os/exec"
	"path/filepath"
)

// kubectlBin is kubectl in the binary directory: `make controlplane` builds
// it from the control plane's Kubernetes release (hack/tools/kubectl).
const kubectlBin = "kubectl"

// Kubectl returns a command that runs kubectl against c as its admin (the
// kubeconfig at KubeconfigPath), with args after --kubeconfig. It fails if
// kubectl has not been built.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (*exec.Cmd, error) {
	if err := requireFiles(c.binDir, kubectlBin); err != nil {
		return nil, err
	}
	args = append([]string{"--kubeconfig=" + c.KubeconfigPath}, args...)
	return exec.CommandContext(ctx, filepath.Join(c.binDir, kubectlBin), args...), nil
}
