package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// allowListKey locates the openfief-egress-allowlist ConfigMap.
var allowListKey = types.NamespacedName{Namespace: plugins.Namespace, Name: plugins.AllowListConfigMap}

// DefaultAllowListBatch is how long the allow-list writer gathers entries
// that only open hosts before it writes them in one patch (OF-15).
const DefaultAllowListBatch = 250 * time.Millisecond

// AllowListWriter writes every plugin's key of the allow-list ConfigMap
// (D-32) through one goroutine, many keys per JSON merge patch (OF-15): the
// ConfigMap holds every plugin's key, so one write per plugin would make the
// bytes written grow with the square of the number of plugins. A change
// that only opens hosts (a new key, or hosts added) is batched and the
// caller goes on: until it lands the proxy refuses those hosts (fail
// closed). A change that closes anything (a key removed, a host dropped)
// is written at once and the caller waits for it, so nothing runs or is
// torn down before its hosts are closed (D-16). It is a manager Runnable
// that runs only on the leader, as the reconcilers do.
type AllowListWriter struct {
	// Client reads the ConfigMap from the manager's cache and writes it.
	Client client.Client
	// Batch is how long opening changes gather before they are written;
	// DefaultAllowListBatch when not positive.
	Batch time.Duration

	once    sync.Once
	kick    chan struct{}
	mu      sync.Mutex
	pending map[string]*string // plugin → value to write; nil removes the key
	waiters []chan error
	// written holds the keys this writer added that it has not removed
	// since, written or being written: the cache may not show them yet, and
	// a removal must not skip them.
	written map[string]bool
}

func (w *AllowListWriter) init() {
	w.once.Do(func() {
		w.kick = make(chan struct{}, 1)
		w.pending = map[string]*string{}
		w.written = map[string]bool{}
	})
}

// NeedLeaderElection makes the writer run on the leader only.
func (w *AllowListWriter) NeedLeaderElection() bool { return true }

// Start writes what is pending every Batch, or four times as long as the
// last write took if that is longer, so writing the ConfigMap (which grows
// with every plugin) never takes more than a fifth of the time; and at once
// when a caller waits. When ctx is done it fails the callers still waiting.
//
// It first makes the ConfigMap, empty, if there is none: the egress proxy
// is Ready only once it has allow-lists to enforce, and a platform with no
// plugin yet must still become Available (an empty ConfigMap gives no
// plugin a list, so every tunnel is still refused). A failed attempt is
// retried with every batch.
func (w *AllowListWriter) Start(ctx context.Context) error {
	w.init()
	batch := w.Batch
	if batch <= 0 {
		batch = DefaultAllowListBatch
	}
	exists := w.ensureExists(ctx) == nil
	next := time.NewTimer(batch)
	defer next.Stop()
	for {
		if !exists {
			exists = w.ensureExists(ctx) == nil
		}
		select {
		case <-ctx.Done():
			w.mu.Lock()
			for _, ch := range w.waiters {
				ch <- ctx.Err()
			}
			w.waiters = nil
			w.mu.Unlock()
			return nil
		case <-w.kick:
		case <-next.C:
		}
		start := time.Now()
		w.flush(ctx)
		next.Reset(max(batch, 4*time.Since(start)))
	}
}

// Set publishes a running plugin's egress allow-list as its key (D-32); a
// plugin without egress gets an empty value, meaning none. Nothing is sent
// when the cache or the pending batch already holds the value. It waits for
// the write only when the change closes a host.
func (w *AllowListWriter) Set(ctx context.Context, plugin string, hosts []string) error {
	w.init()
	value := plugins.EncodeAllowList(hosts)
	current, present, err := w.cached(ctx, plugin)
	if err != nil {
		return err
	}
	w.mu.Lock()
	queued, isPending := w.pending[plugin]
	switch {
	case isPending && queued != nil && *queued == value:
		w.mu.Unlock()
		return nil
	case !isPending && present && current == value:
		w.mu.Unlock()
		return nil
	}
	w.pending[plugin] = &value
	// Wait when this closes a host, or when what the proxy holds is not
	// known yet (a write of this writer the cache does not show).
	if (isPending && queued == nil) || (present && !opensOnly(current, value)) || (!present && w.written[plugin]) {
		return w.waitLocked(ctx)
	}
	w.mu.Unlock()
	return nil
}

// Remove drops a plugin's key: a plugin that does not run has no key, so
// the proxy lets it reach nothing. It returns once the key is gone; nothing
// is sent when neither the cache nor this writer knows the key.
func (w *AllowListWriter) Remove(ctx context.Context, plugin string) error {
	w.init()
	_, present, err := w.cached(ctx, plugin)
	if err != nil {
		return err
	}
	w.mu.Lock()
	if !present && !w.written[plugin] {
		delete(w.pending, plugin) // never written: dropping it is enough
		w.mu.Unlock()
		return nil
	}
	w.pending[plugin] = nil
	return w.waitLocked(ctx)
}

// waitLocked, called with w.mu held, asks for a write now and waits for it.
func (w *AllowListWriter) waitLocked(ctx context.Context) error {
	ch := make(chan error, 1)
	w.waiters = append(w.waiters, ch)
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ensureExists creates the allow-list ConfigMap with no key unless it
// exists already. It looks in the cache first, so a new leader of a running
// platform sends no write for it.
func (w *AllowListWriter) ensureExists(ctx context.Context) error {
	cm := &corev1.ConfigMap{}
	err := w.Client.Get(ctx, allowListKey, cm)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("read the allow-list: %w", err)
	}
	cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: allowListKey.Namespace, Name: allowListKey.Name}}
	err = w.Client.Create(ctx, cm, client.FieldOwner(FieldManager))
	if err == nil || apierrors.IsAlreadyExists(err) {
		return nil
	}
	return fmt.Errorf("create the empty allow-list: %w", err)
}

// cached reads the plugin's key from the cache without copying the
// ConfigMap, which holds every plugin's key.
func (w *AllowListWriter) cached(ctx context.Context, plugin string) (string, bool, error) {
	var cm corev1.ConfigMap
	if err := w.Client.Get(ctx, allowListKey, &cm, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("read allow-list: %w", err)
	}
	v, ok := cm.Data[plugin]
	return v, ok, nil
}

// flush writes everything pending in one patch and answers the waiters. A
// failed batch goes back to pending, unless a newer change replaced an
// entry, and is tried again on the next tick.
func (w *AllowListWriter) flush(ctx context.Context) {
	w.mu.Lock()
	batch, waiters := w.pending, w.waiters
	w.pending, w.waiters = map[string]*string{}, nil
	for k, v := range batch {
		if v != nil {
			w.written[k] = true
		}
	}
	w.mu.Unlock()
	err := writeAllowList(ctx, w.Client, batch)
	w.mu.Lock()
	for k, v := range batch {
		switch {
		case err != nil:
			if _, newer := w.pending[k]; !newer {
				w.pending[k] = v
			}
		case v == nil:
			delete(w.written, k)
		}
	}
	w.mu.Unlock()
	for _, ch := range waiters {
		ch <- err
	}
}

// opensOnly reports whether going from allow-list value old to next only
// adds hosts: every line of old is in next.
func opensOnly(old, next string) bool {
	have := map[string]bool{}
	for h := range strings.SplitSeq(next, "\n") {
		have[h] = true
	}
	for h := range strings.SplitSeq(old, "\n") {
		if !have[h] {
			return false
		}
	}
	return true
}

// writeAllowList sets and removes (nil) keys of the allow-list ConfigMap
// with one JSON merge patch, which touches no other key; it creates the
// ConfigMap when it is missing and there is a key to set.
func writeAllowList(ctx context.Context, c client.Client, entries map[string]*string) error {
	if len(entries) == 0 {
		return nil
	}
	body, err := json.Marshal(map[string]any{"data": entries})
	if err != nil {
		return err
	}
	target := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: allowListKey.Namespace, Name: allowListKey.Name}}
	err = c.Patch(ctx, target, client.RawPatch(types.MergePatchType, body), client.FieldOwner(FieldManager))
	if apierrors.IsNotFound(err) {
		data := map[string]string{}
		for k, v := range entries {
			if v != nil {
				data[k] = *v
			}
		}
		if len(data) == 0 {
			return nil
		}
		target.Data = data
		err = c.Create(ctx, target, client.FieldOwner(FieldManager))
		if apierrors.IsAlreadyExists(err) {
			err = c.Patch(ctx, &corev1.ConfigMap{ObjectMeta: target.ObjectMeta}, client.RawPatch(types.MergePatchType, body), client.FieldOwner(FieldManager))
		}
	}
	if err != nil {
		return fmt.Errorf("write allow-list entries: %w", err)
	}
	return nil
}
