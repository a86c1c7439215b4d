//go:build !cluster

package core

import (
	"os"
	"testing"
)

// TestMain runs the scale benchmark's stand-in when asked
// (scale_standin_test.go), the package's tests otherwise; main_test.go is
// its form with the control plane.
func TestMain(m *testing.M) {
	serveStandInIfAsked()
	os.Exit(m.Run())
}
