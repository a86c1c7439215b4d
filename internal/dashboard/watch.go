package dashboard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// syncTimeout bounds the first list of each watch: a dashboard that cannot
// read the Plugins says so instead of showing an empty table.
const syncTimeout = 30 * time.Second

// watches follows the namespace's Plugins, PluginGrants and the owner's
// trusted-signers ConfigMap with informers (no polling), and tells the
// pages when anything changed.
type watches struct {
	cache     cache.Cache
	namespace string
	catalog   plugins.Catalog

	mu      sync.Mutex
	changed chan struct{}
	// policy is rebuilt when the ConfigMap's resource version changes.
	policyVersion string
	policy        *plugins.TrustPolicy
}

func newWatches(cfg *rest.Config, namespace string, catalog plugins.Catalog) (*watches, error) {
	s, err := apiconv.NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := cache.New(cfg, cache.Options{
		Scheme:            s,
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			// Only the one ConfigMap the operator reads its owner signers from.
			&corev1.ConfigMap{}: {Field: fields.OneTermEqualSelector("metadata.name", plugins.OwnerSignersConfigMap)},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watching the cluster: %w", err)
	}
	return &watches{cache: c, namespace: namespace, catalog: catalog, changed: make(chan struct{})}, nil
}

// start runs the informers until ctx ends and returns once each has listed
// its objects, or an error naming what could not be read.
func (w *watches) start(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- w.cache.Start(ctx) }()
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.notify() },
		UpdateFunc: func(any, any) { w.notify() },
		DeleteFunc: func(any) { w.notify() },
	}
	for _, obj := range []client.Object{&v1alpha1.Plugin{}, &v1alpha1.PluginGrant{}, &corev1.ConfigMap{}} {
		syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
		inf, err := w.cache.GetInformer(syncCtx, obj)
		if err == nil {
			_, err = inf.AddEventHandler(handler)
		}
		if err == nil && !toolscache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
			err = errors.New("timed out listing them (does your kubeconfig user may list and watch them?)")
		}
		cancel()
		if err != nil {
			select {
			case cerr := <-errc:
				if cerr != nil {
					err = cerr
				}
			default:
			}
			return fmt.Errorf("watching %T in namespace %s: %w", obj, w.namespace, err)
		}
	}
	return nil
}

// notify wakes every page waiting in wait.
func (w *watches) notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.changed)
	w.changed = make(chan struct{})
}

// wait returns a channel closed at the next change.
func (w *watches) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// snapshot reads what the informers hold now.
func (w *watches) snapshot(ctx context.Context) (snapshot, error) {
	var ps v1alpha1.PluginList
	if err := w.cache.List(ctx, &ps, client.InNamespace(w.namespace)); err != nil {
		return snapshot{}, err
	}
	var gs v1alpha1.PluginGrantList
	if err := w.cache.List(ctx, &gs, client.InNamespace(w.namespace)); err != nil {
		return snapshot{}, err
	}
	grants := make(map[string]*v1alpha1.PluginGrant, len(gs.Items))
	for i := range gs.Items {
		grants[gs.Items[i].Name] = &gs.Items[i]
	}
	return snapshot{namespace: w.namespace, plugins: ps.Items, grants: grants, policy: w.trustPolicy(ctx)}, nil
}

// trustPolicy is the policy the operator holds (D-45): OpenFief's CI, the
// catalog's publishers and the owner's signers from the ConfigMap. It is nil
// when the ConfigMap does not parse, so no signer is given a kind the
// operator would not give it.
func (w *watches) trustPolicy(ctx context.Context) *plugins.TrustPolicy {
	var cms corev1.ConfigMapList
	if err := w.cache.List(ctx, &cms, client.InNamespace(w.namespace)); err != nil {
		return nil
	}
	var owner []byte
	version := "none"
	for _, cm := range cms.Items {
		if cm.Name == plugins.OwnerSignersConfigMap {
			owner, version = []byte(cm.Data[plugins.OwnerSignersKey]), cm.ResourceVersion
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if version == w.policyVersion && w.policyVersion != "" {
		return w.policy
	}
	w.policyVersion, w.policy = version, ownerPolicy(w.catalog, owner)
	return w.policy
}

// ownerPolicy is the trust policy of catalog and the owner's signers.json
// content owner (none when empty), or nil when owner is not valid: not
// JSON, a malformed signer, or a name another trusted signer has or that is
// reserved for OpenFief's own (an owner key called openfief-ci is never
// shown as OpenFief's CI).
func ownerPolicy(catalog plugins.Catalog, owner []byte) *plugins.TrustPolicy {
	var signers []plugins.Signer
	if len(owner) > 0 {
		var err error
		if signers, err = plugins.ParseOwnerSigners(owner); err != nil {
			return nil
		}
	}
	p, err := plugins.NewTrustPolicy(catalog, signers)
	if err != nil {
		return nil
	}
	return &p
}
