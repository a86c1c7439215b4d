package deploy_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// namespaceLimits renders deploy/crds and returns its LimitRange and
// ResourceQuota.
func namespaceLimits(t *testing.T) (corev1.LimitRange, corev1.ResourceQuota) {
	t.Helper()
	objs, err := deploy.Render("crds")
	if err != nil {
		t.Fatal(err)
	}
	var lr corev1.LimitRange
	var rq corev1.ResourceQuota
	for _, u := range objs {
		var into any
		switch u.GetKind() {
		case "LimitRange":
			into = &lr
		case "ResourceQuota":
			into = &rq
		default:
			continue
		}
		if u.GetNamespace() != plugins.Namespace {
			t.Errorf("%s/%s is in namespace %q", u.GetKind(), u.GetName(), u.GetNamespace())
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
			t.Fatal(err)
		}
	}
	if len(lr.Spec.Limits) != 1 || lr.Spec.Limits[0].Type != corev1.LimitTypeContainer || len(rq.Spec.Hard) == 0 {
		t.Fatalf("deploy/crds renders LimitRange %+v and ResourceQuota %+v", lr.Spec, rq.Spec)
	}
	return lr, rq
}

// TestLimitRangeMatchesThePluginBounds: the namespace's defaults are a
// plugin's defaults and its maxima the most a grant may approve, so the
// backstop neither refuses a plugin the operator builds nor allows a
// container more than any plugin may get.
func TestLimitRangeMatchesThePluginBounds(t *testing.T) {
	lr, _ := namespaceLimits(t)
	l := lr.Spec.Limits[0]
	mi := func(b int64) resource.Quantity { return *resource.NewQuantity(b, resource.BinarySI) }
	milli := func(m int64) resource.Quantity { return *resource.NewMilliQuantity(m, resource.DecimalSI) }
	checks := []struct {
		what string
		got  corev1.ResourceList
		name corev1.ResourceName
		want resource.Quantity
	}{
		{"default memory limit", l.Default, corev1.ResourceMemory, mi(plugins.DefaultMemory + plugins.DefaultTmp)},
		{"default cpu limit", l.Default, corev1.ResourceCPU, milli(plugins.DefaultCPUMilli)},
		{"default ephemeral-storage limit", l.Default, corev1.ResourceEphemeralStorage, mi(plugins.EphemeralLimit)},
		{"default memory request", l.DefaultRequest, corev1.ResourceMemory, mi(plugins.DefaultMemory + plugins.DefaultTmp)},
		{"default cpu request", l.DefaultRequest, corev1.ResourceCPU, milli(plugins.CPURequestMilli)},
		{"default ephemeral-storage request", l.DefaultRequest, corev1.ResourceEphemeralStorage, mi(plugins.EphemeralRequest)},
		{"max memory", l.Max, corev1.ResourceMemory, mi(plugins.MaxMemory + plugins.MaxTmp)},
		{"max cpu", l.Max, corev1.ResourceCPU, milli(plugins.MaxCPUMilli)},
	}
	for _, c := range checks {
		if got, ok := c.got[c.name]; !ok || got.Cmp(c.want) != 0 {
			t.Errorf("%s = %s, want %s", c.what, got.String(), c.want.String())
		}
	}
}

// TestPlatformFitsTheNamespaceLimits: every container of the platform's own
// Deployments sets every resource the quota counts and the LimitRange
// bounds (so no default changes how it runs) within the maxima, and the
// quota holds the platform twice (a rolling update) and 20 plugins at the
// defaults.
func TestPlatformFitsTheNamespaceLimits(t *testing.T) {
	lr, rq := namespaceLimits(t)
	maxima := lr.Spec.Limits[0].Max
	used := corev1.ResourceList{}
	add := func(name corev1.ResourceName, q resource.Quantity, times int64) {
		sum := used[name]
		for range times {
			sum.Add(q)
		}
		used[name] = sum
	}
	for _, dir := range []string{"operator", "core", "egress-proxy"} {
		objs, err := deploy.Render(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range objs {
			if u.GetKind() != "Deployment" {
				continue
			}
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
				t.Fatal(err)
			}
			for _, c := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
				r := c.Resources
				for _, name := range []corev1.ResourceName{corev1.ResourceMemory, corev1.ResourceCPU, corev1.ResourceEphemeralStorage} {
					req, okReq := r.Requests[name]
					lim, okLim := r.Limits[name]
					if !okReq || !okLim {
						t.Errorf("%s/%s sets no %s request or limit; the namespace's default would apply", d.Name, c.Name, name)
						continue
					}
					if m := maxima[name]; !m.IsZero() && lim.Cmp(m) > 0 {
						t.Errorf("%s/%s: %s limit %s above the namespace's maximum %s", d.Name, c.Name, name, lim.String(), m.String())
					}
					add("requests."+name, req, 2)
					if name != corev1.ResourceCPU {
						add("limits."+name, lim, 2)
					}
				}
			}
			add(corev1.ResourcePods, *resource.NewQuantity(1, resource.DecimalSI), 2)
		}
	}
	const plugins20 = 20
	mem := *resource.NewQuantity(plugins.DefaultMemory+plugins.DefaultTmp, resource.BinarySI)
	add("requests.memory", mem, plugins20)
	add("limits.memory", mem, plugins20)
	add("requests.cpu", *resource.NewMilliQuantity(plugins.CPURequestMilli, resource.DecimalSI), plugins20)
	add("requests.ephemeral-storage", *resource.NewQuantity(plugins.EphemeralRequest, resource.BinarySI), plugins20)
	add("limits.ephemeral-storage", *resource.NewQuantity(plugins.EphemeralLimit, resource.BinarySI), plugins20)
	add(corev1.ResourcePods, *resource.NewQuantity(1, resource.DecimalSI), plugins20)
	for name, hard := range rq.Spec.Hard {
		u, ok := used[name]
		if !ok {
			t.Errorf("the quota counts %s, which this test does not sum", name)
			continue
		}
		if u.Cmp(hard) > 0 {
			t.Errorf("%s: the platform twice and %d plugins need %s, the quota holds %s", name, plugins20, u.String(), hard.String())
		}
	}
	for _, name := range []corev1.ResourceName{"requests.memory", "limits.memory", "requests.cpu", "requests.ephemeral-storage", "limits.ephemeral-storage", "pods"} {
		if _, ok := rq.Spec.Hard[name]; !ok {
			t.Errorf("the quota does not bound %s", name)
		}
	}
}
