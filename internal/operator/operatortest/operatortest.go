// Package operatortest runs the operator in-process for tests: a
// controller-runtime manager built as cmd/operator builds it, against a test
// API server, until the test ends. The admission, dashboard and operator
// tests start it here. (The scale benchmark runs its operator as a process
// of its own instead, the command in scaleoperator.)
//
// It takes the operator's manager options and AddToManager as functions
// instead of importing internal/operator, so that the operator's own
// in-package tests can use it too (a package's tests cannot import a package
// that imports it). Only _test.go files import it, tagged cluster
// (hack/check/test-tags.sh).
package operatortest

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"

	"github.com/arkadiuss/openfief/internal/apiconv"
)

// Options says how to build one operator manager.
type Options struct {
	// Manager returns the manager's options over the API types' scheme:
	// an operator.Options' ManagerOptions method.
	Manager func(*runtime.Scheme) ctrl.Options
	// Setup adds what the manager runs: operator.AddToManager with the
	// test's options, or a part of the operator.
	Setup func(ctrl.Manager) error
	// As, when set, is the user the manager's client impersonates, such as
	// the operator's ServiceAccount under its Role.
	As string
	// QPS and Burst, when QPS is positive, are the client's rate limit;
	// otherwise the config's is kept.
	QPS   float32
	Burst int
	// Transport, when set, wraps the client's transport, to count the
	// requests sent or those refused.
	Transport func(http.RoundTripper) http.RoundTripper
	// MayFail logs the manager's error instead of failing the test: a
	// manager whose Role lacks what its caches list stops with one, and the
	// test reports what the API server refused instead.
	MayFail bool
}

// newManager builds the manager o describes, with opts, against cfg
// (copied, never changed) and adds o.Setup's controllers.
func newManager(cfg *rest.Config, o Options, opts ctrl.Options) (ctrl.Manager, error) {
	cfg = rest.CopyConfig(cfg)
	if o.As != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: o.As}
	}
	if o.QPS > 0 {
		cfg.QPS, cfg.Burst = o.QPS, o.Burst
	}
	if o.Transport != nil {
		cfg.Wrap(o.Transport)
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	if o.Setup != nil {
		if err := o.Setup(mgr); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// Run is one operator manager running in the test's process.
type Run struct {
	once sync.Once
	stop func()
}

// Stop stops the manager and waits until it has returned. It is safe to
// call more than once; the test's cleanup calls it too.
func (r *Run) Stop() { r.once.Do(r.stop) }

// Start builds the manager o describes, as New does, and runs it in the
// background until Stop is called or the test ends. Several may run in one
// test process, so the controllers' names are not required to be unique.
// A manager that cannot be built fails the test.
func Start(t testing.TB, cfg *rest.Config, o Options) *Run {
	t.Helper()
	s, err := apiconv.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	opts := o.Manager(s)
	opts.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
	mgr, err := newManager(cfg, o, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			report := t.Errorf
			if o.MayFail {
				report = t.Logf
			}
			report("the operator (as %q) stopped: %v", o.As, err)
		}
	}()
	r := &Run{stop: func() { cancel(); <-done }}
	t.Cleanup(r.Stop)
	return r
}
