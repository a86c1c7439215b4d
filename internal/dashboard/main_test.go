//go:build cluster

package dashboard_test

import (
	"os"
	"testing"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

func TestMain(m *testing.M) { os.Exit(devcluster.Main(m)) }
