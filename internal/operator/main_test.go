package operator

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// TestMain runs the package's tests and stops the shared control plane they
// start (one for the whole package). The managers' own logs are dropped;
// tests report what they saw.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(devcluster.Main(m))
}
