package cli

import (
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/kubeconfig"
)

// fieldOwner names the CLI as the field manager of what it writes.
const fieldOwner = client.FieldOwner("openfief-cli")

// requestTimeout bounds each request to the API server.
const requestTimeout = 30 * time.Second

// RESTConfig loads the client configuration the way kubectl does: the
// --kubeconfig file, else $KUBECONFIG, else ~/.kube/config, else the
// in-cluster configuration; --context picks a context other than the
// current one.
func (e *Env) RESTConfig() (*rest.Config, error) {
	cfg, err := kubeconfig.LikeKubectl(e.Kubeconfig, e.Context)
	if err != nil {
		return nil, exitf(ExitUsage, "kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "openfief-cli"
	if cfg.Timeout == 0 {
		cfg.Timeout = requestTimeout
	}
	return cfg, nil
}

// Client returns a client for Plugins, PluginGrants and the built-in types.
func (e *Env) Client() (client.Client, error) {
	cfg, err := e.RESTConfig()
	if err != nil {
		return nil, err
	}
	s, err := apiconv.NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, exitf(ExitFailure, "connecting to the API server: %w", err)
	}
	return c, nil
}
