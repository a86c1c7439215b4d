// Package kubeconfig is where OpenFief's programs find the API server. The
// platform's servers (cmd/egress-proxy, cmd/openfief-core) run in the
// cluster and take a kubeconfig file only when told to (ForServer); the
// owner's CLI finds its configuration the way kubectl does (LikeKubectl).
// The operator keeps controller-runtime's own loader (ctrl.GetConfig), which
// registers its --kubeconfig flag itself.
package kubeconfig

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ForServer returns the configuration a platform server reaches the API
// server with: the kubeconfig file at path, or the in-cluster configuration
// (the pod's ServiceAccount) when path is empty. Its errors name the
// --kubeconfig flag the servers give path with.
func ForServer(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration (use --kubeconfig outside a cluster): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// LikeKubectl loads the configuration as kubectl does: the file at path,
// else the files in $KUBECONFIG, else ~/.kube/config, else the in-cluster
// configuration; context, when not empty, picks a context other than the
// current one.
func LikeKubectl(path, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	overrides := &clientcmd.ConfigOverrides{CurrentContext: context}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
}
