package devcluster_test

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

func TestMain(m *testing.M) {
	// envtest logs through controller-runtime; these tests do not need it.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(devcluster.Main(m))
}
