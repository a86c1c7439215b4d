package operator

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// allowListKey locates the openfief-egress-allowlist ConfigMap.
var allowListKey = types.NamespacedName{Namespace: plugins.Namespace, Name: plugins.AllowListConfigMap}

// AllowListFieldManager is the server-side apply field manager of one
// plugin's allow-list entry, so one plugin's reconcile never touches another
// plugin's entry.
func AllowListFieldManager(plugin string) string { return "openfief-operator/allowlist/" + plugin }

// applyAllowList publishes a running plugin's egress allow-list as its key in
// the allow-list ConfigMap (D-32). A plugin without egress gets an empty
// value, meaning none. Nothing is sent when the cache already holds the value.
func applyAllowList(ctx context.Context, c client.Client, plugin string, hosts []string) error {
	value := plugins.EncodeAllowList(hosts)
	var cm corev1.ConfigMap
	err := c.Get(ctx, allowListKey, &cm)
	switch {
	case err == nil:
		if v, ok := cm.Data[plugin]; ok && v == value {
			return nil
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read allow-list: %w", err)
	}
	ac := corev1ac.ConfigMap(allowListKey.Name, allowListKey.Namespace).WithData(map[string]string{plugin: value})
	if err := c.Apply(ctx, ac, client.FieldOwner(AllowListFieldManager(plugin)), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply allow-list entry: %w", err)
	}
	return nil
}

// removeAllowList drops a plugin's key from the allow-list ConfigMap: a
// plugin that does not run has no key, so the proxy lets it reach nothing.
// The key is removed by a JSON merge patch, which works whoever wrote it.
func removeAllowList(ctx context.Context, c client.Client, plugin string) error {
	var cm corev1.ConfigMap
	if err := c.Get(ctx, allowListKey, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("read allow-list: %w", err)
	}
	if _, ok := cm.Data[plugin]; !ok {
		return nil
	}
	return removeAllowListKeys(ctx, c, &cm, []string{plugin})
}

// removeAllowListKeys drops keys from the allow-list ConfigMap cm with one
// JSON merge patch; a ConfigMap gone meanwhile is no error.
func removeAllowListKeys(ctx context.Context, c client.Client, cm *corev1.ConfigMap, keys []string) error {
	data := make(map[string]any, len(keys))
	for _, k := range keys {
		data[k] = nil
	}
	body, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, cm, client.RawPatch(types.MergePatchType, body), client.FieldOwner(FieldManager)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove allow-list entries %v: %w", keys, err)
	}
	return nil
}
