package core

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
)

// Plugins follows the Plugins of one namespace with an informer and tells
// which instances run now (Targets). Every change lists the cache again and
// hands the whole, sorted set to the callback: level-triggered, so a missed
// or repeated event does no harm. Its RBAC: get, list and watch plugins.
type Plugins struct {
	c  cache.Cache
	on func([]Target)
	// seen, when set, is called after on with every Plugin's UID by name,
	// running or not; an error it returns refreshes again after
	// seenRetry (removed.go).
	seen  func(context.Context, map[string]string) error
	retry *time.Timer

	mu      sync.Mutex
	running map[string]Target
}

// syncTimeout bounds the wait for the first list of Plugins.
const syncTimeout = 2 * time.Minute

// seenRetry is how soon a failed seen callback runs again.
const seenRetry = 30 * time.Second

// WatchPlugins starts following the Plugins of namespace until ctx is done
// and returns once the first list is in, having called onChange with it.
// onChange is called serially, with every running instance sorted by name;
// then onSeen, if not nil, with the UID of every Plugin by name.
func WatchPlugins(ctx context.Context, cfg *rest.Config, namespace string, onChange func([]Target), onSeen func(context.Context, map[string]string) error) (*Plugins, error) {
	scheme, err := apiconv.NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{namespace: {}}})
	if err != nil {
		return nil, fmt.Errorf("plugin cache: %w", err)
	}
	p := &Plugins{c: c, on: onChange, seen: onSeen, running: map[string]Target{}}
	inf, err := c.GetInformer(ctx, &v1alpha1.Plugin{})
	if err != nil {
		return nil, fmt.Errorf("plugin informer: %w", err)
	}
	refresh := func(any) { p.refresh(ctx) }
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    refresh,
		UpdateFunc: func(_, obj any) { p.refresh(ctx) },
		DeleteFunc: refresh,
	}); err != nil {
		return nil, err
	}
	startErr := make(chan error, 1)
	go func() { startErr <- c.Start(ctx) }()
	// Fail closed and say so, rather than wait forever, when the Plugins
	// cannot be listed (a missing RBAC rule, no CRD).
	sctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if !c.WaitForCacheSync(sctx) {
		select {
		case err := <-startErr:
			return nil, fmt.Errorf("plugin cache: %w", err)
		default:
			return nil, fmt.Errorf("the Plugins of %s could not be listed within %v (RBAC: get, list, watch plugins; the CRDs installed?): %w", namespace, syncTimeout, sctx.Err())
		}
	}
	p.refresh(ctx)
	return p, nil
}

// refresh lists the cached Plugins and reports the running set.
func (p *Plugins) refresh(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var list v1alpha1.PluginList
	if err := p.c.List(ctx, &list, client.InNamespace("")); err != nil {
		return // the cache is stopping; the next event lists again
	}
	running := map[string]Target{}
	var targets []Target
	for i := range list.Items {
		if t, ok := TargetOf(&list.Items[i]); ok {
			running[t.Instance] = t
			targets = append(targets, t)
		}
	}
	slices.SortFunc(targets, func(a, b Target) int { return strings.Compare(a.Instance, b.Instance) })
	p.running = running
	if p.on != nil {
		p.on(targets)
	}
	if p.seen != nil {
		uids := make(map[string]string, len(list.Items))
		for i := range list.Items {
			uids[list.Items[i].Name] = string(list.Items[i].UID)
		}
		if p.retry != nil {
			p.retry.Stop()
		}
		if err := p.seen(ctx, uids); err != nil && ctx.Err() == nil {
			p.retry = time.AfterFunc(seenRetry, func() { p.refresh(ctx) })
		}
	}
}

// Running reports whether instance runs under a grant now; the token
// verifier serves only these (D-27).
func (p *Plugins) Running(instance string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.running[instance]
	return ok
}

// Target returns the running instance's target.
func (p *Plugins) Target(instance string) (Target, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.running[instance]
	return t, ok
}
