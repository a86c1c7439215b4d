//go:build cluster

// Package incluster runs the whole platform the way a user runs it: the
// operator, egress-proxy and openfief-core images built from this tree,
// installed by `openfief platform install` on a real node with cluster DNS
// and a pre-made volume, their pods real containers.
package incluster

import (
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// started is set once a test has started a real node, so TestMain checks
// that nothing of it was left on the machine.
var started bool

// TestMain drops controller-runtime's log (the CLI's clients): the tests
// report what they saw. The isolation-at-start phase's attackers, parallel
// subtests that wait on pods, all run at once
// (testutil.WaitBoundParallel). It then checks that no real node was left
// behind.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	if err := testutil.WaitBoundParallel(attackers); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	if started {
		left, err := devcluster.NodeLeftoversWhenIdle(devcluster.NodeLockWait())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
		for _, l := range left {
			fmt.Fprintln(os.Stderr, "FAIL: left behind:", l)
			code = 1
		}
	}
	os.Exit(code)
}
