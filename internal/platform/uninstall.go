package platform

import (
	"context"
	"errors"
	"fmt"
	"io"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// ErrNotInstalled is returned when the cluster holds none of the command's
// objects.
var ErrNotInstalled = errors.New("the platform is not installed here (no object labelled " + LabelManagedBy + "=" + ValueManagedBy + ")")

// operatorKinds are the kinds of what the operator makes for a plugin (and
// for the proxy: the allow-list and signing-keys ConfigMaps), all labelled
// plugins.LabelManagedBy=plugins.ValueManagedBy.
var operatorKinds = []client.Object{
	&appsv1.Deployment{}, &corev1.Service{}, &networkingv1.NetworkPolicy{},
	&corev1.ConfigMap{}, &corev1.ServiceAccount{}, &corev1.Secret{},
}

// UninstallOptions say what an uninstall removes beyond the platform.
type UninstallOptions struct {
	// DeleteData also removes the owner's data: the core's claim (its
	// SQLite database), the CRDs with every Plugin and PluginGrant, and the
	// openfief namespace with whatever else is in it.
	DeleteData bool
}

// egressProxyDeployment is the egress proxy's Deployment, as deploy/egress-proxy
// names it.
const egressProxyDeployment = "openfief-egress-proxy"

// Uninstall removes the platform: first its Deployments but the egress
// proxy's (so the operator stops making plugin workloads and the core stops
// calling them, waiting until their pods are gone), then every plugin
// workload the operator made, then the egress proxy: the plugins' tunnels
// through it ended with their pods, so its pods stop at once rather than
// keep them open for their shutdown grace. Then the rest of the command's
// objects, cluster-scoped ones (the admission policy among them) last.
// Without DeleteData it keeps the CRDs (and so every Plugin and
// PluginGrant, which are the owner's), the namespace and the core's
// PersistentVolumeClaim; a later install picks them up again. It is bounded
// by ctx and names each step on out.
func Uninstall(ctx context.Context, c client.Client, o UninstallOptions, out io.Writer) error {
	owned, err := Owned(ctx, c)
	if err != nil {
		return err
	}
	if len(owned) == 0 {
		return ErrNotInstalled
	}
	del := func(u client.Object, what string) error {
		if err := c.Delete(ctx, u, client.PropagationPolicy("Background")); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s: %w", what, err)
		}
		fmt.Fprintf(out, "deleted %s\n", what)
		return nil
	}

	delWorkload := func(u *unstructured.Unstructured) error {
		if err := del(u, describe(u)); err != nil {
			return err
		}
		sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
		return waitNoPods(ctx, c, sel, describe(u), out)
	}

	// 1. The platform's workloads but the egress proxy, and their pods.
	var proxy *unstructured.Unstructured
	for _, u := range owned {
		if u.GetKind() != "Deployment" {
			continue
		}
		if u.GetName() == egressProxyDeployment && u.GetNamespace() == plugins.Namespace {
			proxy = u
			continue
		}
		if err := delWorkload(u); err != nil {
			return err
		}
	}

	// 2. What the operator made.
	for _, obj := range operatorKinds {
		if err := c.DeleteAllOf(ctx, obj, client.InNamespace(plugins.Namespace),
			client.MatchingLabels{plugins.LabelManagedBy: plugins.ValueManagedBy}, client.PropagationPolicy("Background")); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete the operator's %T objects: %w", obj, err)
		}
	}
	allowList := &corev1.ConfigMap{}
	allowList.Name, allowList.Namespace = plugins.AllowListConfigMap, plugins.Namespace
	if err := c.Delete(ctx, allowList); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete ConfigMap %s/%s: %w", plugins.Namespace, plugins.AllowListConfigMap, err)
	}
	fmt.Fprintf(out, "deleted every plugin workload the operator made (%s=%s)\n", plugins.LabelManagedBy, plugins.ValueManagedBy)
	if err := waitNoPods(ctx, c, map[string]string{plugins.LabelManagedBy: plugins.ValueManagedBy}, "the plugin workloads", out); err != nil {
		return err
	}

	// 3. The egress proxy, which no plugin pod uses any more.
	if proxy != nil {
		if err := delWorkload(proxy); err != nil {
			return err
		}
	}

	// 4. The rest: namespaced objects, then cluster-scoped ones, in reverse
	// apply order; the data last, if asked.
	var data []*unstructured.Unstructured
	for pass := range 2 {
		for i := len(owned) - 1; i >= 0; i-- {
			u := owned[i]
			k, _ := kindOf(u.GroupVersionKind().GroupKind())
			if u.GetKind() == "Deployment" || k.namespaced != (pass == 0) {
				continue
			}
			if keptKinds[u.GetKind()] {
				data = append(data, u)
				continue
			}
			if err := del(u, describe(u)); err != nil {
				return err
			}
		}
	}
	if !o.DeleteData {
		for _, u := range data {
			fmt.Fprintf(out, "kept %s (the owner's data; --delete-data removes it)\n", describe(u))
		}
		return nil
	}
	for _, u := range data {
		if err := del(u, describe(u)); err != nil {
			return err
		}
	}
	return waitGone(ctx, c, data, out)
}

// waitNoPods waits until no pod in openfief matches sel.
func waitNoPods(ctx context.Context, c client.Client, sel map[string]string, what string, out io.Writer) error {
	if len(sel) == 0 {
		return nil
	}
	t := newTicker()
	defer t.stop()
	said := false
	for {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(plugins.Namespace), client.MatchingLabels(sel)); err != nil {
			return fmt.Errorf("list the pods of %s: %w", what, err)
		}
		if len(pods.Items) == 0 {
			return nil
		}
		if !said {
			fmt.Fprintf(out, "waiting for %d pod(s) of %s to go\n", len(pods.Items), what)
			said = true
		}
		if err := t.wait(ctx); err != nil {
			return fmt.Errorf("%d pod(s) of %s are still there, e.g. %s: %w", len(pods.Items), what, pods.Items[0].Name, err)
		}
	}
}

// waitGone waits until every object of objs is gone (a namespace takes a
// while: its controller empties it first).
func waitGone(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, out io.Writer) error {
	t := newTicker()
	defer t.stop()
	for _, u := range objs {
		for {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(u.GroupVersionKind())
			err := c.Get(ctx, client.ObjectKeyFromObject(u), got)
			if apierrors.IsNotFound(err) {
				fmt.Fprintf(out, "%s is gone\n", describe(u))
				break
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", describe(u), err)
			}
			if err := t.wait(ctx); err != nil {
				return fmt.Errorf("%s is still there: %w", describe(u), err)
			}
		}
	}
	return nil
}
