//go:build cluster

package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// floorNamespace holds the raw write floor's copies.
const floorNamespace = "openfief-floor"

// floorResult is what writing the floor took.
type floorResult struct {
	writes  int64
	elapsed time.Duration
}

// floorPlugin is what the floor writes for one plugin.
type floorPlugin struct {
	name          string
	owned         []*unstructured.Unstructured
	allowList     string
	pluginStatus  []byte
	grantStatus   []byte
	plugin, grant client.Object
}

// floorWrite is the raw write floor of the operator's convergence:
// a plain client, at the operator's rate limit and with as many workers as
// the operator reconciles at once (workers), writes for each named plugin exactly the
// objects the operator's convergence ends with, copied from what the
// operator wrote into a namespace of their own: the five owned objects
// (server-side apply, as the operator does), the Plugin's status and the
// grant's status (merge patches), and at the end the allow-list ConfigMap
// with every key in one apply: 7 writes per plugin and one. No reads, no
// Events, no retries. The
// Plugins and grants the statuses go on are created before the clock starts,
// as the operator's are.
func floorWrite(b *testing.B, c *devcluster.Cluster, cl client.Client, names []string, qps float64, burst, workers int) floorResult {
	b.Helper()
	ctx := context.Background()
	s, err := apiconv.NewScheme()
	if err != nil {
		b.Fatal(err)
	}
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: floorNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	work := floorPlan(b, cl, s, names)

	// Plugins and grants to put the statuses on, untimed.
	forEach(b, names, 16, func(name string) error {
		for _, obj := range []client.Object{work[name].plugin, work[name].grant} {
			if err := cl.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		return nil
	})

	counter := &writeCounter{}
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = float32(qps), burst
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	w, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	forEach(b, names, workers, func(name string) error {
		fp := work[name]
		for _, u := range fp.owned {
			if err := w.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
				return fmt.Errorf("floor apply %s %s: %w", u.GetKind(), u.GetName(), err)
			}
		}
		if err := w.Status().Patch(ctx, fp.plugin, client.RawPatch(types.MergePatchType, fp.pluginStatus)); err != nil {
			return fmt.Errorf("floor plugin status %s: %w", name, err)
		}
		if err := w.Status().Patch(ctx, fp.grant, client.RawPatch(types.MergePatchType, fp.grantStatus)); err != nil {
			return fmt.Errorf("floor grant status %s: %w", name, err)
		}
		return nil
	})
	all := map[string]string{}
	for name, fp := range work {
		all[name] = fp.allowList
	}
	ac := corev1ac.ConfigMap(plugins.AllowListConfigMap, floorNamespace).WithData(all)
	if err := w.Apply(ctx, ac, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		b.Fatalf("floor allow-list: %v", err)
	}
	return floorResult{writes: counter.writes.Load(), elapsed: time.Since(start)}
}

// floorPlan reads what the operator wrote for the named plugins and turns it
// into the floor's copies in floorNamespace.
func floorPlan(b *testing.B, cl client.Client, s *runtime.Scheme, names []string) map[string]*floorPlugin {
	b.Helper()
	ctx := context.Background()
	work := make(map[string]*floorPlugin, len(names))
	for _, name := range names {
		work[name] = &floorPlugin{name: name}
	}
	for _, list := range []client.ObjectList{&corev1.ServiceAccountList{}, &corev1.ConfigMapList{}, &corev1.ServiceList{}, &networkingv1.NetworkPolicyList{}, &appsv1.DeploymentList{}} {
		if err := cl.List(ctx, list, client.InNamespace(plugins.Namespace), client.HasLabels{plugins.LabelPluginName}); err != nil {
			b.Fatal(err)
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			b.Fatal(err)
		}
		for _, item := range items {
			obj := item.(client.Object)
			fp := work[obj.GetLabels()[plugins.LabelPluginName]]
			if fp == nil {
				continue
			}
			fp.owned = append(fp.owned, floorCopy(b, s, obj))
		}
	}
	var cm corev1.ConfigMap
	if err := cl.Get(ctx, allowListKey, &cm); err != nil {
		b.Fatal(err)
	}
	var pl v1alpha1.PluginList
	if err := cl.List(ctx, &pl, client.InNamespace(plugins.Namespace)); err != nil {
		b.Fatal(err)
	}
	var gl v1alpha1.PluginGrantList
	if err := cl.List(ctx, &gl, client.InNamespace(plugins.Namespace)); err != nil {
		b.Fatal(err)
	}
	for i := range pl.Items {
		if fp := work[pl.Items[i].Name]; fp != nil {
			p := &v1alpha1.Plugin{ObjectMeta: metav1.ObjectMeta{Name: fp.name, Namespace: floorNamespace}, Spec: pl.Items[i].Spec}
			fp.plugin, fp.pluginStatus = p, statusPatch(b, pl.Items[i].Status)
			fp.allowList = cm.Data[fp.name]
		}
	}
	for i := range gl.Items {
		if fp := work[gl.Items[i].Name]; fp != nil {
			g := &v1alpha1.PluginGrant{ObjectMeta: metav1.ObjectMeta{Name: fp.name, Namespace: floorNamespace}, Spec: gl.Items[i].Spec}
			fp.grant, fp.grantStatus = g, statusPatch(b, gl.Items[i].Status)
		}
	}
	for name, fp := range work {
		if len(fp.owned) != 5 || fp.plugin == nil || fp.grant == nil {
			b.Fatalf("floor: plugin %s has %d owned objects, plugin %v, grant %v", name, len(fp.owned), fp.plugin != nil, fp.grant != nil)
		}
	}
	return work
}

// floorCopy is obj as the floor applies it: in floorNamespace, with its
// name, labels, annotations and spec (or data), without status, owner
// references and what the API server assigned (a Service's cluster IPs).
func floorCopy(b *testing.B, s *runtime.Scheme, obj client.Object) *unstructured.Unstructured {
	b.Helper()
	gvk, err := apiutil.GVKForObject(obj, s)
	if err != nil {
		b.Fatal(err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		b.Fatal(err)
	}
	delete(m, "status")
	m["metadata"] = map[string]any{"name": obj.GetName(), "namespace": floorNamespace}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	u.SetLabels(obj.GetLabels())
	u.SetAnnotations(obj.GetAnnotations())
	if gvk.Kind == "Service" {
		unstructured.RemoveNestedField(m, "spec", "clusterIP")
		unstructured.RemoveNestedField(m, "spec", "clusterIPs")
	}
	return u
}

// statusPatch is a merge patch setting status to v.
func statusPatch(b *testing.B, v any) []byte {
	b.Helper()
	body, err := json.Marshal(map[string]any{"status": v})
	if err != nil {
		b.Fatal(err)
	}
	return body
}
