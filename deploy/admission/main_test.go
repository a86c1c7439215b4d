//go:build cluster

// Package admission tests the ValidatingAdmissionPolicy in this directory
// (kubectl apply -k deploy/admission) on a real API server. It holds only
// tests; deploy's own fast render tests stay free of a control plane.
package admission

import (
	"os"
	"testing"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// TestMain runs the package's tests and stops the control plane the
// admission tests share.
func TestMain(m *testing.M) { os.Exit(devcluster.Main(m)) }
