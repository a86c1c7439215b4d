//go:build cluster

// Package e2e runs the plugin lifecycle end to end on the full local
// platform (internal/devstack): a control plane built from source with the
// Deployment controller, garbage collector, scheduler and kwok, the
// operator, the egress proxy and openfief-core, driven with the owner's CLI.
// The operator, the proxy and the core run as their ServiceAccounts, bound by
// the RBAC of deploy/operator, deploy/egress-proxy and deploy/core, and the
// suite fails if the API server refuses any of their requests. The data path
// runs the real nbp-fx binary as a local process, called by the test and by
// the core, through the real egress proxy to a loopback stand-in for NBP. Last, the install manifests are applied, pinned to
// the operator and egress-proxy images built from this tree.
package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/arkadiuss/openfief/internal/core"
	"github.com/arkadiuss/openfief/internal/devstack"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// localPlugins are the plugins the suite runs as local processes, by
// instance: the core calls them there instead of at their Service, which no
// process serves under kwok.
var localPlugins = &localResolver{urls: map[string]string{}}

type localResolver struct {
	mu   sync.Mutex
	urls map[string]string
}

func (r *localResolver) set(instance, url string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.urls[instance] = url
}

// resolve is the core's Resolver: a local process if one runs, else the
// plugin's Service (which fails under kwok, and the core retries).
func (r *localResolver) resolve(instance string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if u, ok := r.urls[instance]; ok {
		return u
	}
	return core.ServiceResolver(plugins.Namespace, plugins.DefaultPluginPort)(instance)
}

// stack is the platform every test shares.
var stack *devstack.Stack

// nbp is the stand-in for api.nbp.pl: the proxy resolves that name to
// loopback and connects port 443 to this server instead.
var nbp *devstack.FakeNBP

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	nbp, err = devstack.StartFakeNBP("")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake NBP:", err)
		return 1
	}
	defer nbp.Close()
	dir, err := os.MkdirTemp("", "openfief-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintln(os.Stderr, "removing the platform's directory:", err)
		}
	}()
	refused := &refusals{}
	stack, err = devstack.Start(context.Background(), devstack.Options{
		Dir:                  dir,
		ProxyResolver:        nbp.Resolver(),
		ProxyDialer:          nbp.Dialer(),
		UnsafeAllowPrefixes:  devstack.LoopbackPrefixes(),
		RunAsServiceAccounts: true,
		WrapTransport:        refused.wrap,
		CoreResolve:          localPlugins.resolve,
		// A schedule fast enough to see several syncs in a test, and
		// retries patient enough for a plugin process still starting.
		CoreScheduler: core.SchedulerOptions{
			DefaultInterval: 2 * time.Second, FirstSyncDelay: 500 * time.Millisecond,
			Backoff: 200 * time.Millisecond, MaxBackoff: time.Second, MaxAttempts: 30,
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the platform:", err)
		return 1
	}
	defer stack.Stop()
	code := m.Run()
	if got := refused.list(); len(got) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the API server refused %d requests of the operator (%s), the egress proxy (%s) or the core (%s), "+
			"which run with the RBAC of deploy/operator, deploy/egress-proxy and deploy/core: a rule is missing there:\n  %s\n",
			len(got), devstack.OperatorUser, devstack.ProxyUser, devstack.CoreUser, strings.Join(got, "\n  "))
		code = 1
	}
	return code
}

// refusals records the requests of the platform's operator and proxy that
// the API server answers 403 Forbidden.
type refusals struct {
	mu   sync.Mutex
	seen []string
}

// wrap is a devstack.Options.WrapTransport.
func (r *refusals) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusForbidden {
			r.mu.Lock()
			r.seen = append(r.seen, req.Method+" "+req.URL.Path+" as "+req.Header.Get("Impersonate-User"))
			r.mu.Unlock()
		}
		return resp, err
	})
}

func (r *refusals) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
