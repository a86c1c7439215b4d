//go:build cluster

// Package corecli tests CLI commands against the real openfief-core, run in
// this process on a test API server. The CLI never links the core (its
// package tests cannot import it), so such tests live here.
package corecli

import (
	"os"
	"testing"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// TestMain runs the tests and stops the shared control plane they start.
func TestMain(m *testing.M) { os.Exit(devcluster.Main(m)) }
