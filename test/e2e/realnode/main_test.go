//go:build cluster

package realnode

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/arkadiuss/openfief/internal/core"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/devstack"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// The platform on a real node, shared by the package's tests, and the NBP
// stand-in on the node's bridge (port 443 of the node's address, which the
// proxy resolves api.nbp.pl to).
var shared struct {
	once  sync.Once
	stack *devstack.Stack
	nbp   *devstack.FakeNBP
	err   error
	dir   string
	// resolver is the egress proxy's.
	resolver *resolver
}

// standInHosts are the names the egress proxy resolves to the node's bridge
// address, where the NBP stand-in serves on 443.
var standInHosts = []string{"api.nbp.pl", "rates.example.org"}

// resolver answers the egress proxy's lookups of standInHosts with the
// node's bridge address once the node runs, and the names a test set with
// theirs; other names do not exist.
type resolver struct {
	mu    sync.Mutex
	names map[string]netip.Addr
}

// set makes name resolve to a, or not at all for the zero address.
func (r *resolver) set(name string, a netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names == nil {
		r.names = map[string]netip.Addr{}
	}
	if !a.IsValid() {
		delete(r.names, name)
		return
	}
	r.names[name] = a
}

func (r *resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.names[strings.TrimSuffix(strings.ToLower(host), ".")]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// The package's tests share one platform on one real node, started by the
// first test that calls platform. Most of their time is spent waiting for
// pods, so four of them run in parallel (t.Parallel, each with plugins of
// its own): the core's sync, the resource bounds, the rollout and the
// TypeScript connector. Two run alone, before those: the data path, because
// TestCoreSyncsPodOnRealNode counts every request the NBP stand-in gets
// after its revocation, and the isolation table, because it compares the
// kernel's verdicts with a model of every NetworkPolicy in the namespace,
// which other tests' plugins would change under it.

// TestMain drops controller-runtime's log (the in-process operator's): the
// tests report what they saw. The four parallel tests all run at once
// unless -test.parallel is given: its default, the machine's cores, would
// hold two of them back on two cores, though they wait on pods, not on the
// CPU. It stops the shared platform at the end.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	if err := testutil.WaitBoundParallel(4); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	if shared.nbp != nil {
		shared.nbp.Close()
	}
	if shared.stack != nil {
		shared.stack.Stop()
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
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// platform starts the platform on a real node on first use, or skips the
// test where a real node cannot run.
func platform(t *testing.T) (*devstack.Stack, *devstack.FakeNBP) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the platform on a real node: not in -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("a real node needs root: containers, cgroups, a bridge and netfilter rules")
	}
	shared.once.Do(func() {
		start := time.Now()
		res := &resolver{}
		shared.resolver = res
		if shared.dir, shared.err = os.MkdirTemp("", "openfief-realnode-"); shared.err != nil {
			return
		}
		shared.stack, shared.err = devstack.Start(context.Background(), devstack.Options{
			Dir:           shared.dir,
			Node:          devcluster.NodeReal,
			ProxyResolver: res,
			// The stand-in is on the node's bridge, a private range; so
			// are the stand-in addresses of devcluster.StandInAddress.
			UnsafeAllowPrefixes: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), devcluster.StandInPrefix},
			// TestCoreSyncsPodOnRealNode's and
			// TestTypeScriptConnectorOnRealNode's instances are synced
			// every coreInterval; the others keep the default (an hour).
			CoreScheduler: core.SchedulerOptions{Intervals: map[string]time.Duration{coreInstance: coreInterval, tsInstance: coreInterval}},
		})
		if shared.err != nil {
			return
		}
		gw := shared.stack.Cluster.NodeGateway()
		addr, _ := netip.AddrFromSlice(gw.To4())
		for _, h := range standInHosts {
			res.set(h, addr)
		}
		shared.nbp, shared.err = devstack.StartFakeNBP(net.JoinHostPort(gw.String(), "443"))
		fmt.Printf("platform with a real node up in %v\n", time.Since(start).Round(time.Millisecond))
	})
	if shared.err != nil {
		t.Fatalf("starting the platform on a real node: %v", shared.err)
	}
	return shared.stack, shared.nbp
}
