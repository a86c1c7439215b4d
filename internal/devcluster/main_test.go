//go:build cluster

package devcluster_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestMain runs the package's tests and then stops the control planes they
// shared (devcluster.Main), checking that the shared real node left nothing
// on the machine.
//
// What the tests start, and why:
//   - a shared minimal control plane (kubectl_test.go,
//     cluster_token_test.go) and a shared full one with two kwok nodes
//     (fakenode_test.go, cluster_workloads_test.go): they only use the API
//     and the fake nodes.
//   - one shared real node, with the cluster DNS and one pre-made volume
//     (sharedNode, sharednode_test.go), for the tests that only use a node:
//     TestRealNodeClusterDNS, TestRealNodeVolumes,
//     TestRealNodeEnforcesNetworkPolicy, TestRealNodeServiceAccountToken and
//     TestRealNodeDefaultDenyHoldsStrippedPod, each in a namespace of its own
//     deleted at its end, so they run in parallel (they wait on pods, not on
//     the CPU). Its leftovers are checked once, after it stops.
//   - a real node of its own for each test of a node's own life:
//     TestRealNode (start, a pod, logs, exec, stop, no leftovers, sysctls
//     restored), TestRealNodeCleanedAfterKill (a child process's node,
//     killed, then CleanNodeLeftovers) and TestRealNodeStopNetworkPolicy
//     (stops kube-router, and checks the cleanup without it). They stop the
//     shared node first if it runs (ownRealNode): the machine runs one real
//     node at a time. The sharednode_ files sort after theirs, so go test
//     runs them after these and starts the shared node once.
//   - control planes of their own where a test kills, restarts or fails to
//     start one (cluster_orphans_test.go, cluster_restart_test.go,
//     cluster_output_test.go, bindir_test.go).
//
// go test runs a package's tests in the order of their files' names. The
// tests that start only control planes are in files that sort before the
// real node's (bindir_, cluster_, fakenode_, kubectl_), so they run while
// the package waits for the machine's node lock (another package's node),
// and the node's tests run back to back once it has it.
//
// The five shared-node tests run at once (testutil.WaitBoundParallel).
func TestMain(m *testing.M) {
	if err := testutil.WaitBoundParallel(5); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(devcluster.Main(m))
}
