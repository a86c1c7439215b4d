//go:build cluster

package operator

import (
	"os"
	"testing"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// TestMain runs the package's tests and stops the shared control plane they
// start (one for the whole package).
func TestMain(m *testing.M) {
	os.Exit(devcluster.Main(m))
}
