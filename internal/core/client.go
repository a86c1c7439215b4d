package core

import "k8s.io/client-go/rest"

// coreClientConfig is the configuration of the core's client of the API
// server.
func coreClientConfig(cfg *rest.Config) *rest.Config { return cfg }
