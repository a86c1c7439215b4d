// Package e2e runs the plugin lifecycle end to end on the full local
// platform (internal/devstack): a control plane built from source with the
// Deployment controller, garbage collector, scheduler and kwok, the operator
// and the egress proxy, driven with the owner's CLI. The operator and the
// proxy run as their ServiceAccounts, bound by the RBAC of deploy/operator and
// deploy/egress-proxy, and the suite fails if the API server refuses any of
// their requests. The data path runs the real nbp-fx binary as a local
// process, as the core would call it, through the real egress proxy to a
// loopback stand-in for NBP. Last, the install manifests are applied, pinned to
// the operator and egress-proxy images built from this tree.
package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/arkadiuss/openfief/internal/devstack"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// stack is the platform every test shares.
var stack *devstack.Stack

// nbp is the stand-in for api.nbp.pl: the proxy resolves that name to
// loopback and connects port 443 to this server instead.
var nbp *testutil.FakeNBP

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	nbp, err = testutil.StartFakeNBP("127.0.0.1:0")
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
		ProxyResolver:        fixedResolver{"api.nbp.pl": netip.MustParseAddr("127.0.0.1")},
		ProxyDialer:          &redirectDialer{to: map[string]string{"127.0.0.1:443": nbp.Addr()}},
		UnsafeAllowPrefixes:  []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		RunAsServiceAccounts: true,
		WrapTransport:        refused.wrap,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the platform:", err)
		return 1
	}
	defer stack.Stop()
	code := m.Run()
	if got := refused.list(); len(got) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the API server refused %d requests of the operator (%s) or the egress proxy (%s), "+
			"which run with the RBAC of deploy/operator and deploy/egress-proxy: a rule is missing there:\n  %s\n",
			len(got), devstack.OperatorUser, devstack.ProxyUser, strings.Join(got, "\n  "))
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

// fixedResolver answers the proxy's lookups from a table; other names do
// not exist. The proxy still applies its address policy to the answers.
type fixedResolver map[string]netip.Addr

func (r fixedResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[strings.TrimSuffix(strings.ToLower(host), ".")]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// redirectDialer connects the addresses the proxy checked to the test's
// servers, and records what it dialled.
type redirectDialer struct {
	to     map[string]string
	mu     sync.Mutex
	dialed []string
}

func (d *redirectDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, address)
	d.mu.Unlock()
	if to, ok := d.to[address]; ok {
		address = to
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}
