package kube

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/arkadiuss/openfief/internal/egress"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// AllowLists follows the allow-list ConfigMap with an informer and gives the
// proxy its decoded lists (D-32). It implements egress.AllowListSource. All
// lists change together: each version of the ConfigMap is decoded whole with
// plugins.DecodeAllowLists and swapped in at once. It fails closed: until
// the first list arrives, while the ConfigMap is missing, and while it does
// not decode, no plugin has a list and Ready reports why. While the API
// server is unreachable the informer keeps the last version it saw.
type AllowLists struct {
	egress.AllowListStore

	namespace, name string
	log             *slog.Logger

	mu     sync.Mutex
	store  cache.Store
	synced func() bool
	ready  bool
	reason string
}

// Reasons Ready gives while not ready.
const (
	notReadySyncing = "waiting for the first list of the allow-list ConfigMap"
)

// WatchAllowLists starts following the ConfigMap namespace/name until ctx
// is done. The watch is limited to that one object by a field selector, so
// get, list and watch on that name are all the RBAC it needs. It returns at
// once; Ready turns true when the ConfigMap has been read and decoded.
func WatchAllowLists(ctx context.Context, client kubernetes.Interface, namespace, name string, log *slog.Logger) *AllowLists {
	if log == nil {
		log = slog.Default()
	}
	a := &AllowLists{namespace: namespace, name: name, log: log, reason: notReadySyncing}
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	cms := client.CoreV1().ConfigMaps(namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return cms.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return cms.Watch(ctx, opts)
		},
	}
	refresh := func(any) { a.refresh() }
	store, controller := cache.NewInformerWithOptions(cache.InformerOptions{
		// As client-go's generated informers do: a client that cannot
		// stream a watch's initial list (client-go's fake clientset, in
		// tests) is listed then watched instead.
		ListerWatcher: cache.ToListWatcherWithWatchListSemantics(lw, client),
		ObjectType:    &corev1.ConfigMap{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    refresh,
			UpdateFunc: func(_, obj any) { a.refresh() },
			DeleteFunc: refresh,
		},
	})
	a.mu.Lock()
	a.store, a.synced = store, controller.HasSynced
	a.mu.Unlock()
	go controller.RunWithContext(ctx)
	go func() {
		// The handlers see every version; this catches the case where
		// the first list is empty and no handler runs at all.
		if cache.WaitForCacheSync(ctx.Done(), controller.HasSynced) {
			a.refresh()
		}
	}()
	return a
}

// Ready reports whether the proxy has allow-lists to enforce and, if not, why.
func (a *AllowLists) Ready() (bool, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ready, a.reason
}

// refresh reads the ConfigMap from the informer's cache and swaps in what it
// holds: the decoded lists, or none (fail closed). It is level-triggered, so
// a missed or repeated event does no harm.
func (a *AllowLists) refresh() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.store == nil || !a.synced() {
		return
	}
	lists, reason := a.read()
	if reason != "" {
		a.AllowListStore.Set(nil)
	} else {
		a.AllowListStore.Set(lists)
	}
	if a.ready != (reason == "") || a.reason != reason {
		if reason == "" {
			a.log.Info("egress allow-lists loaded", "configmap", a.namespace+"/"+a.name, "plugins", len(lists))
		} else {
			a.log.Warn("egress allow-lists unavailable; refusing every tunnel", "configmap", a.namespace+"/"+a.name, "reason", reason)
		}
	}
	a.ready, a.reason = reason == "", reason
}

// read decodes the cached ConfigMap, or says why there are no lists.
func (a *AllowLists) read() (plugins.AllowLists, string) {
	obj, exists, err := a.store.GetByKey(a.namespace + "/" + a.name)
	if err != nil {
		return nil, fmt.Sprintf("reading the informer cache: %v", err)
	}
	if !exists {
		return nil, fmt.Sprintf("ConfigMap %s/%s not found", a.namespace, a.name)
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil, fmt.Sprintf("unexpected object %T in the informer cache", obj)
	}
	if len(cm.BinaryData) > 0 {
		return nil, fmt.Sprintf("ConfigMap %s/%s has binaryData, which the allow-list format does not use", a.namespace, a.name)
	}
	lists, err := plugins.DecodeAllowLists(cm.Data)
	if err != nil {
		return nil, fmt.Sprintf("ConfigMap %s/%s does not decode: %v", a.namespace, a.name, err)
	}
	return lists, ""
}
