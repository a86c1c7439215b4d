//go:build cluster

package operator

import (
	"os"
	"testing"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// TestMain runs the package's tests and stops the shared control plane they
// start (one for the whole package). A process started by the scale
// benchmark as its operator (scale_child_test.go) runs the operator instead.
func TestMain(m *testing.M) {
	if os.Getenv(childKubeconfigEnv) != "" {
		os.Exit(runOperatorChild())
	}
	os.Exit(devcluster.Main(m))
}
