package devcluster

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// shared holds the control planes of a test package, one per mode and kind
// of node.
var shared struct {
	mu       sync.Mutex
	clusters map[sharedKey]*sharedCluster
}

// sharedKey tells the shared control planes apart.
type sharedKey struct {
	mode Mode
	node NodeKind
}

// sharedCluster is the outcome of starting one shared control plane.
type sharedCluster struct {
	cluster *Cluster
	err     error
}

// Main runs the tests of a package whose tests call Shared, then stops the
// control planes they started (checking, after a real node, that the
// machine holds nothing of it: NodeLeftoversWhenIdle), and returns the exit
// code for os.Exit. An
// interrupt (SIGINT, SIGTERM) also stops them before the process exits.
// controller-runtime's log (envtest's, and that of any manager a test runs)
// is dropped: tests report what they saw. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(devcluster.Main(m)) }
func Main(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case sig := <-sigs:
			fmt.Fprintf(os.Stderr, "devcluster: %v: stopping the control planes\n", sig)
			if err := StopShared(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			os.Exit(130)
		case <-done:
		}
	}()

	code := m.Run()
	signal.Stop(sigs)
	if err := StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Shared returns the package's control plane of opts.Mode and opts.Node,
// starting it on first use; the options of that first call win for the
// whole package. Later calls reuse it, and a failed start fails every test
// asking for it. The package's TestMain must call Main, which stops the
// control planes.
//
// A shared real node (Node: NodeReal) holds the machine's node lock until
// it stops: a test that starts a node of its own calls StopSharedNode first.
func Shared(t testing.TB, opts Options) *Cluster {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.clusters == nil {
		shared.clusters = map[sharedKey]*sharedCluster{}
	}
	key := sharedKey{mode: opts.Mode, node: opts.Node}
	sc, ok := shared.clusters[key]
	if !ok {
		c, err := Start(context.Background(), opts)
		sc = &sharedCluster{cluster: c, err: err}
		shared.clusters[key] = sc
	}
	if sc.err != nil {
		what := opts.Mode.String()
		if opts.Node == NodeReal {
			what += " (real node)"
		}
		t.Fatalf("starting the %s control plane: %v", what, sc.err)
	}
	return sc.cluster
}

// StopShared stops every control plane Shared started. Main calls it.
func StopShared() error {
	return stopShared(func(sharedKey) bool { return true })
}

// StopSharedNode stops the control plane with a real node that Shared
// started, if one runs, so that a test can start a node of its own (the
// machine runs one at a time); a later Shared starts it again.
func StopSharedNode() error {
	return stopShared(func(k sharedKey) bool { return k.node == NodeReal })
}

// stopShared stops the shared control planes whose keys match, then, if one
// had a real node, checks that the machine holds nothing of it.
func stopShared(match func(sharedKey) bool) error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	var first error
	node := false
	for key, sc := range shared.clusters {
		if !match(key) {
			continue
		}
		if sc.cluster != nil {
			if err := sc.cluster.Stop(); err != nil && first == nil {
				first = err
			}
			node = node || sc.cluster.node != nil
		}
		delete(shared.clusters, key)
	}
	if node && first == nil {
		first = checkNodeLeftovers()
	}
	return first
}

// checkNodeLeftovers returns an error naming every trace of a real node left
// on the machine, once no node runs.
func checkNodeLeftovers() error {
	left, err := NodeLeftoversWhenIdle(NodeLockWait())
	if err != nil {
		return fmt.Errorf("devcluster: the shared real node's leftovers: %w", err)
	}
	if len(left) > 0 {
		return fmt.Errorf("devcluster: the shared real node left behind:\n%s", strings.Join(left, "\n"))
	}
	return nil
}
