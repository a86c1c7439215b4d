//go:build cluster

package operator

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// limitsNamespace is a namespace of its own, set up as deploy/crds sets up
// openfief (the restricted Pod Security Standard, the LimitRange, the
// ResourceQuota), so the package's other tests keep theirs.
const limitsNamespace = "openfief-limits-test"

// setUpLimitsNamespace creates limitsNamespace with deploy/crds' namespace
// labels, LimitRange and ResourceQuota, the quota's status set as the quota
// controller (not in this control plane) sets it: used holds used.
func setUpLimitsNamespace(t *testing.T, cl client.Client, used corev1.ResourceList) {
	t.Helper()
	ctx := context.Background()
	for _, u := range renderKustomization(t, filepath.Join("..", "..", "deploy", "crds")) {
		switch u.GetKind() {
		case "Namespace":
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: limitsNamespace, Labels: u.GetLabels()}}
			if !strings.Contains(ns.Labels["pod-security.kubernetes.io/enforce"], "restricted") {
				t.Fatalf("deploy/crds' namespace labels %v do not enforce restricted", ns.Labels)
			}
			if err := cl.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		case "LimitRange":
			var lr corev1.LimitRange
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &lr); err != nil {
				t.Fatal(err)
			}
			lr.Namespace = limitsNamespace
			if err := cl.Create(ctx, &lr); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		case "ResourceQuota":
			var rq corev1.ResourceQuota
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rq); err != nil {
				t.Fatal(err)
			}
			rq.Namespace = limitsNamespace
			if err := cl.Create(ctx, &rq); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			if err := cl.Get(ctx, client.ObjectKeyFromObject(&rq), &rq); err != nil {
				t.Fatal(err)
			}
			full := corev1.ResourceList{}
			for name := range rq.Spec.Hard {
				full[name] = resource.MustParse("0")
				if q, ok := used[name]; ok {
					full[name] = q
				}
			}
			rq.Status = corev1.ResourceQuotaStatus{Hard: rq.Spec.Hard, Used: full}
			if err := cl.Status().Update(ctx, &rq); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// pluginPod is the pod the Deployment BuildObjects makes would create, in
// limitsNamespace, with its ServiceAccount there.
func pluginPod(t *testing.T, cl client.Client, asked, granted plugins.Resources) *corev1.Pod {
	t.Helper()
	o := objectsFor(t, asked, granted)
	sa := o.ServiceAccount.DeepCopy()
	sa.Namespace, sa.OwnerReferences = limitsNamespace, nil
	if err := cl.Create(context.Background(), sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tmpl := o.Deployment.Spec.Template
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "plugin-fx-", Namespace: limitsNamespace, Labels: tmpl.Labels, Annotations: tmpl.Annotations},
		Spec:       *tmpl.Spec.DeepCopy(),
	}
}

// TestPluginPodAdmittedUnderNamespaceLimits creates, on the real API server
// and through its admission (PodSecurity restricted, LimitRanger,
// ResourceQuota), the pod of a plugin at the defaults and one granted the
// maxima: both are admitted unchanged; a container that sets nothing gets
// the namespace's defaults; a pod beyond the quota is refused.
func TestPluginPodAdmittedUnderNamespaceLimits(t *testing.T) {
	_, cl := testCluster(t)
	ctx := context.Background()
	setUpLimitsNamespace(t, cl, nil)

	maxima := plugins.Resources{Memory: "2Gi", CPU: "2", Tmp: "1Gi"}
	for name, r := range map[string]plugins.Resources{"defaults": {}, "maxima": maxima} {
		t.Run(name, func(t *testing.T) {
			pod := pluginPod(t, cl, r, r)
			want := pod.Spec.Containers[0].Resources.DeepCopy()
			if err := cl.Create(ctx, pod, client.DryRunAll); err != nil {
				t.Fatalf("the plugin's pod is refused: %v", err)
			}
			got := pod.Spec.Containers[0].Resources
			for _, list := range []struct{ want, got corev1.ResourceList }{{want.Requests, got.Requests}, {want.Limits, got.Limits}} {
				if len(list.want) != len(list.got) {
					t.Errorf("admission changed the resources: %v, want %v", describeList(list.got), describeList(list.want))
				}
				for k, w := range list.want {
					if g := list.got[k]; g.Cmp(w) != 0 {
						t.Errorf("admission changed %s to %s, want %s", k, g.String(), w.String())
					}
				}
			}
			if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsGroup == nil || *sc.RunAsGroup == 0 {
				t.Errorf("admitted pod runs with group %v", sc)
			}
		})
	}

	t.Run("a container that sets nothing gets the plugin defaults", func(t *testing.T) {
		pod := pluginPod(t, cl, plugins.Resources{}, plugins.Resources{})
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
		if err := cl.Create(ctx, pod, client.DryRunAll); err != nil {
			t.Fatalf("refused: %v", err)
		}
		r := pod.Spec.Containers[0].Resources
		if r.Limits.Memory().Value() != plugins.DefaultMemory+plugins.DefaultTmp || r.Limits.Cpu().MilliValue() != plugins.DefaultCPUMilli ||
			r.Limits.StorageEphemeral().Value() != plugins.EphemeralLimit || r.Requests.Cpu().MilliValue() != plugins.CPURequestMilli {
			t.Errorf("defaulted to requests %s, limits %s", describeList(r.Requests), describeList(r.Limits))
		}
	})

	t.Run("above the maxima is refused", func(t *testing.T) {
		pod := pluginPod(t, cl, plugins.Resources{}, plugins.Resources{})
		pod.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("4Gi")
		pod.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("4Gi")
		err := cl.Create(ctx, pod, client.DryRunAll)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "maximum memory usage per Container is 3Gi") {
			t.Errorf("a 4Gi container: %v, want forbidden by the LimitRange", err)
		}
	})
}

// TestPluginPodRefusedBeyondQuota: once the namespace's quota is used up,
// the API server refuses the next plugin pod.
func TestPluginPodRefusedBeyondQuota(t *testing.T) {
	_, cl := testCluster(t)
	// Everything but 100Mi of the requested memory is used.
	setUpLimitsNamespace(t, cl, corev1.ResourceList{"requests.memory": resource.MustParse("5020Mi")})
	pod := pluginPod(t, cl, plugins.Resources{}, plugins.Resources{})
	err := cl.Create(context.Background(), pod, client.DryRunAll)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: openfief-quota") {
		t.Errorf("a 192Mi plugin with 100Mi left: %v, want forbidden by the quota", err)
	}
}
