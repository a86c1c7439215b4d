package testutil

import "path/filepath"

// CRDDir is the repository's deploy/crds, for tests that install the Plugin
// and PluginGrant CRDs on a control plane.
func CRDDir() string {
	return filepath.Join(MustRepoRoot(), "deploy", "crds")
}
