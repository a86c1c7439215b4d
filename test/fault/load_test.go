//go:build cluster

package fault

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// scenario is what the load does to one plugin, as an owner would with the
// CLI: install, approve, upgrade, approve again, revoke, uninstall. Steps
// that only make sense once the previous one took effect (upgrading a
// plugin that runs) wait for it, as `openfief plugin wait` would.
type scenario int

const (
	// upgradeApproved: v1 granted and running, upgraded to v2 (which asks
	// for one more host), then the grant widened: v2 runs with both hosts.
	upgradeApproved scenario = iota
	// revoked: v1 granted and running, then the grant deleted: nothing runs.
	revoked
	// upgradePending: v1 running, upgraded to v2, never approved: v1 keeps
	// running under its grant, the new host pending.
	upgradePending
	// uninstalled: v1 running, then grant and Plugin deleted: nothing left.
	uninstalled
	// neverGranted: v2 installed, never approved: nothing runs.
	neverGranted
	// regranted: v1 running, grant deleted, then granted again: v1 runs.
	regranted
	// narrowed: v1 running, then its grant narrowed to no host: v1 keeps
	// running with no egress, its host pending.
	narrowed
	nScenarios
)

func (s scenario) String() string {
	return [...]string{"upgrade-approved", "revoked", "upgrade-pending", "uninstalled", "never-granted", "regranted", "narrowed"}[s]
}

// expectation is what a plugin must look like once the cluster settled.
type expectation struct {
	gone   bool                   // the Plugin and everything of it is gone
	status metav1.ConditionStatus // Ready's status
	reason string                 // Ready's reason
	image  string                 // the image that runs; "" when nothing does
	// allow is the plugin's allow-list value; nil means no key.
	allow *string
	// pending is status.pendingApproval.egress.
	pending []string
}

func allowList(hosts ...string) *string {
	v := plugins.EncodeAllowList(hosts)
	return &v
}

func canonical(hosts ...string) []string {
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		c, err := plugins.CanonicalEgressHost(h)
		if err != nil {
			panic(err)
		}
		out = append(out, c)
	}
	return out
}

// expect is the settled state of a plugin that went through s. It is
// written out by hand from docs/operator.md, not computed with the
// operator's code.
func (s scenario) expect() expectation {
	switch s {
	case upgradeApproved:
		return expectation{status: metav1.ConditionTrue, reason: v1alpha1.ReasonRunning, image: suite.v2.ref, allow: allowList(hostAPI, hostStatic)}
	case revoked, neverGranted:
		e := expectation{status: metav1.ConditionFalse, reason: v1alpha1.ReasonNoGrant}
		if s == neverGranted {
			e.pending = canonical(hostAPI, hostStatic)
		} else {
			e.pending = canonical(hostAPI)
		}
		return e
	case upgradePending:
		return expectation{status: metav1.ConditionTrue, reason: v1alpha1.ReasonRunningPreviousVersion, image: suite.v1.ref, allow: allowList(hostAPI), pending: canonical(hostStatic)}
	case uninstalled:
		return expectation{gone: true}
	case regranted:
		return expectation{status: metav1.ConditionTrue, reason: v1alpha1.ReasonRunning, image: suite.v1.ref, allow: allowList(hostAPI)}
	case narrowed:
		// The same image as the spec, narrowed: it runs with what is still
		// granted (none of its hosts), and Ready says Running.
		return expectation{status: metav1.ConditionTrue, reason: v1alpha1.ReasonRunning, image: suite.v1.ref, allow: allowList(), pending: canonical(hostAPI)}
	}
	panic(s)
}

// driver plays scenarios against the API server with the admin identity,
// retrying each operation until it succeeds (the API server may be down).
type driver struct {
	p   *platform
	ops atomic.Int64
	// waitFor bounds each wait for the operator to act.
	waitFor time.Duration
}

// assign gives n plugins named prefix-00... a scenario each: every scenario
// in turn, in an order shuffled by rng.
func assign(rng *rand.Rand, prefix string, n int) map[string]scenario {
	out := make(map[string]scenario, n)
	order := rng.Perm(n)
	for i := range n {
		out[fmt.Sprintf("%s-%02d", prefix, order[i])] = scenario(i % int(nScenarios))
	}
	return out
}

// run plays every plugin's scenario, with workers plugins at a time, each
// with its own random pauses drawn from seed. It returns the first error.
func (d *driver) run(ctx context.Context, plan map[string]scenario, workers int, seed uint64) error {
	names := make([]string, 0, len(plan))
	for n := range plan {
		names = append(names, n)
	}
	slices.Sort(names)
	work := make(chan int)
	errc := make(chan error, len(names))
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				rng := rand.New(rand.NewPCG(seed, uint64(i)))
				if err := d.play(ctx, names[i], plan[names[i]], rng); err != nil {
					errc <- fmt.Errorf("%s (%s): %w", names[i], plan[names[i]], err)
				}
			}
		}()
	}
	// Start order shuffled too, so scenarios interleave differently.
	for _, i := range rand.New(rand.NewPCG(seed, 1<<40)).Perm(len(names)) {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errc)
	var errs []error
	for err := range errc {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// play runs one scenario.
func (d *driver) play(ctx context.Context, name string, s scenario, rng *rand.Rand) error {
	pause := func() { time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond) }
	steps := []func() error{}
	add := func(f ...func() error) { steps = append(steps, f...) }
	install := func(img image) func() error { return func() error { return d.createPlugin(ctx, name, img) } }
	grant := func(hosts ...string) func() error { return func() error { return d.setGrant(ctx, name, hosts) } }
	wait := func(reason string, img image) func() error {
		return func() error { return d.waitReady(ctx, name, reason, img.ref) }
	}
	switch s {
	case upgradeApproved:
		add(install(suite.v1), grant(hostAPI), wait(v1alpha1.ReasonRunning, suite.v1),
			func() error { return d.setImage(ctx, name, suite.v2) }, wait(v1alpha1.ReasonRunningPreviousVersion, suite.v1),
			grant(hostAPI, hostStatic))
	case revoked:
		add(install(suite.v1), grant(hostAPI), wait(v1alpha1.ReasonRunning, suite.v1),
			func() error { return d.deleteGrant(ctx, name) })
	case upgradePending:
		add(install(suite.v1), grant(hostAPI), wait(v1alpha1.ReasonRunning, suite.v1),
			func() error { return d.setImage(ctx, name, suite.v2) })
	case uninstalled:
		add(install(suite.v1), grant(hostAPI), wait(v1alpha1.ReasonRunning, suite.v1),
			func() error { return d.deleteGrant(ctx, name) }, func() error { return d.deletePlugin(ctx, name) })
	case neverGranted:
		add(install(suite.v2))
	case regranted:
		add(install(suite.v1), grant(hostAPI), wait(v1alpha1.ReasonRunning, suite.v1),
			func() error { return d.deleteGrant(ctx, name) }, wait(v1alpha1.ReasonNoGrant, image{}),
			grant(hostAPI))
	case narrowed:
		add(install(suite.v1), grant(hostAPI), wait(v1alpha1.ReasonRunning, suite.v1), grant())
	}
	for _, step := range steps {
		pause()
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// do retries op until it succeeds or ctx ends, and counts it.
func (d *driver) do(ctx context.Context, what string, op func(context.Context) error) error {
	for {
		opCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := op(opCtx)
		cancel()
		if err == nil {
			d.ops.Add(1)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func key(name string) client.ObjectKey {
	return client.ObjectKey{Namespace: plugins.Namespace, Name: name}
}

func (d *driver) createPlugin(ctx context.Context, name string, img image) error {
	return d.do(ctx, "install", func(ctx context.Context) error {
		p := testutil.MakePlugin(name, img.ref).Obj()
		p.Spec.Manifest = apiconv.ManifestToAPI(img.manifest)
		if err := d.p.cl.Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	})
}

func (d *driver) setImage(ctx context.Context, name string, img image) error {
	return d.do(ctx, "upgrade", func(ctx context.Context) error {
		var p v1alpha1.Plugin
		if err := d.p.cl.Get(ctx, key(name), &p); err != nil {
			return err
		}
		p.Spec.Image = img.ref
		p.Spec.Manifest = apiconv.ManifestToAPI(img.manifest)
		return d.p.cl.Update(ctx, &p)
	})
}

// setGrant creates or replaces the grant: the connector capability and
// exactly hosts.
func (d *driver) setGrant(ctx context.Context, name string, hosts []string) error {
	return d.do(ctx, "grant", func(ctx context.Context) error {
		want := testutil.MakeGrant(name).Capabilities(v1alpha1.Capability(plugins.CapabilityConnector)).Egress(hosts...).Obj()
		var g v1alpha1.PluginGrant
		err := d.p.cl.Get(ctx, key(name), &g)
		switch {
		case apierrors.IsNotFound(err):
			return d.p.cl.Create(ctx, want)
		case err != nil:
			return err
		}
		g.Spec = want.Spec
		return d.p.cl.Update(ctx, &g)
	})
}

func (d *driver) deleteGrant(ctx context.Context, name string) error {
	return d.do(ctx, "revoke", func(ctx context.Context) error {
		return client.IgnoreNotFound(d.p.cl.Delete(ctx, testutil.MakeGrant(name).Obj()))
	})
}

func (d *driver) deletePlugin(ctx context.Context, name string) error {
	return d.do(ctx, "uninstall", func(ctx context.Context) error {
		p := &v1alpha1.Plugin{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plugins.Namespace}}
		return client.IgnoreNotFound(d.p.cl.Delete(ctx, p))
	})
}

// waitReady waits until the Plugin's status describes its current
// generation with Ready's reason, running img when it is not empty.
func (d *driver) waitReady(ctx context.Context, name, reason, img string) error {
	ctx, cancel := context.WithTimeout(ctx, d.waitFor)
	defer cancel()
	var last string
	for {
		var p v1alpha1.Plugin
		if err := d.p.cl.Get(ctx, key(name), &p); err != nil {
			last = err.Error()
		} else {
			c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			switch {
			case c == nil:
				last = "no Ready condition"
			case p.Status.ObservedGeneration != p.Generation || c.ObservedGeneration != p.Generation:
				last = fmt.Sprintf("status of generation %d, spec at %d", c.ObservedGeneration, p.Generation)
			case c.Reason != reason:
				last = "Ready " + c.Reason + ": " + c.Message
			case img != "" && (p.Status.Deployed == nil || p.Status.Deployed.Image != img):
				last = "deployed is not " + img
			default:
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for Ready %s: %w; last seen: %s", reason, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
