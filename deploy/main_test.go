package deploy

import (
	"os"
	"testing"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// TestMain runs the package's tests and stops the control plane the
// admission tests share.
func TestMain(m *testing.M) { os.Exit(devcluster.Main(m)) }
