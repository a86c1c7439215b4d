//go:build cluster

// Package apiversions proves, on a real API server, the path
// docs/api-versions.md plans for moving openfief.io/v1alpha1 to the next
// version: the shipped CRDs served beside a next version the tests build
// from them, objects read and written in either version, the storage
// version moved, every stored object rewritten as a storage migration does,
// status.storedVersions trimmed and the old version retired. It holds only
// tests; nothing in deploy/ ships the next version yet.
package apiversions

import (
	"os"
	"testing"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// TestMain runs the package's tests; each starts a control plane of its own
// (etcd and kube-apiserver only: no node, no node lock), as each changes the
// CRDs.
func TestMain(m *testing.M) { os.Exit(devcluster.Main(m)) }
