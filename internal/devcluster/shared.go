package devcluster

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// shared holds the control planes of a test package, one per mode.
var shared struct {
	mu       sync.Mutex
	clusters map[Mode]*sharedCluster
}

// sharedCluster is the outcome of starting one shared control plane.
type sharedCluster struct {
	cluster *Cluster
	err     error
}

// Main runs the tests of a package whose tests call Shared, then stops the
// control planes they started, and returns the exit code for os.Exit. An
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

// Shared returns the package's control plane of opts.Mode, starting it on
// first use; the options of that first call win for the whole package. Later
// calls reuse it, and a failed start fails every test asking for it. The
// package's TestMain must call Main, which stops the control planes.
func Shared(t testing.TB, opts Options) *Cluster {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.clusters == nil {
		shared.clusters = map[Mode]*sharedCluster{}
	}
	sc, ok := shared.clusters[opts.Mode]
	if !ok {
		c, err := Start(context.Background(), opts)
		sc = &sharedCluster{cluster: c, err: err}
		shared.clusters[opts.Mode] = sc
	}
	if sc.err != nil {
		t.Fatalf("starting the %v control plane: %v", opts.Mode, sc.err)
	}
	return sc.cluster
}

// StopShared stops every control plane Shared started. Main calls it.
func StopShared() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	var first error
	for mode, sc := range shared.clusters {
		if sc.cluster != nil {
			if err := sc.cluster.Stop(); err != nil && first == nil {
				first = err
			}
		}
		delete(shared.clusters, mode)
	}
	return first
}
