package testutil

import (
	"path/filepath"
	"runtime"
)

// CRDDir is the repository's deploy/crds, found from this file's location,
// for tests that install the Plugin and PluginGrant CRDs on a control plane.
func CRDDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "deploy", "crds")
}
