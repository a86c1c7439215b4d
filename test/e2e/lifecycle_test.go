//go:build cluster

package e2e

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestLifecycle walks one plugin through what `make demo` shows, asserting
// the objects, the conditions and the allow-list at every step.
func TestLifecycle(t *testing.T) {
	c := kube(t)
	v1, v2 := stack.Images["demo-v1"].String(), stack.Images["demo-v2"].String()
	const name = "fx"

	// Install: the vendor's request; nothing runs without a grant.
	openfief(t, 0, "plugin", "install", name, "--image", v1, "--signers", stack.SignersFile)
	openfief(t, 0, "plugin", "wait", name, "--for", v1alpha1.ReasonNoGrant)
	assertOnlyDenyAll(t, c, name)

	// Approve: the workload runs, with exactly the approved host.
	openfief(t, 0, "plugin", "approve", name, "--yes")
	openfief(t, 0, "plugin", "wait", name, "--for", v1alpha1.ReasonRunning)
	assertRunning(t, c, name, v1, "api.nbp.pl:443\n")

	// Upgrade to a version asking for one more host: the previous version
	// keeps running, and only the new host is pending.
	openfief(t, 0, "plugin", "upgrade", name, "--image", v2, "--signers", stack.SignersFile)
	openfief(t, 0, "plugin", "wait", name, "--for", v1alpha1.ReasonRunningPreviousVersion)
	var p v1alpha1.Plugin
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: plugins.Namespace, Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	if pa := p.Status.PendingApproval; pa == nil || !slices.Equal(pa.Egress, []string{"static.nbp.pl:443"}) ||
		len(pa.Capabilities)+len(pa.Secrets)+len(pa.DataTiers) != 0 {
		t.Errorf("pendingApproval = %+v, want exactly static.nbp.pl:443", pa)
	}
	assertRunning(t, c, name, v1, "api.nbp.pl:443\n")

	// Approve again: the new version runs with both hosts.
	openfief(t, 0, "plugin", "approve", name, "--yes")
	openfief(t, 0, "plugin", "wait", name, "--for", v1alpha1.ReasonRunning)
	assertRunning(t, c, name, v2, "api.nbp.pl:443\nstatic.nbp.pl:443\n")

	// Revoke: nothing runs; a deny-all NetworkPolicy is all that is left.
	openfief(t, 0, "plugin", "revoke", name, "--yes")
	openfief(t, 0, "plugin", "wait", name, "--for", v1alpha1.ReasonNoGrant)
	assertOnlyDenyAll(t, c, name)

	// Uninstall: the garbage collector removes the rest.
	openfief(t, 0, "plugin", "uninstall", name, "--yes", "--wait", "60s")
	testutil.Eventually(t, waitTimeout, "nothing of the plugin left", func() (bool, string) {
		if get(t, c, name, &networkingv1.NetworkPolicy{}) {
			return false, "NetworkPolicy remains"
		}
		if _, ok := allowList(t, c, name); ok {
			return false, "allow-list key remains"
		}
		return true, ""
	})
	openfief(t, 9, "plugin", "status", name)
}

// assertRunning checks the workload of a running plugin: an Available
// Deployment running image whose pod is Running, its allow-list entry, and a
// NetworkPolicy with the core's ingress and the core's and proxy's egress.
func assertRunning(t *testing.T, c client.Client, name, image, allow string) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, name+" running "+image, func() (bool, string) {
		var d appsv1.Deployment
		if !get(t, c, name, &d) {
			return false, "no Deployment"
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != image {
			return false, "Deployment runs " + img
		}
		if d.Status.AvailableReplicas != 1 {
			return false, "not available"
		}
		var pods corev1.PodList
		if err := c.List(context.Background(), &pods, client.InNamespace(plugins.Namespace), client.MatchingLabels{plugins.LabelPluginName: name}); err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Spec.Containers[0].Image == image && p.DeletionTimestamp == nil {
				running++
			}
		}
		if running != 1 {
			return false, "running pods of the image: " + string(rune('0'+running))
		}
		if v, ok := allowList(t, c, name); !ok || v != allow {
			return false, "allow-list " + v
		}
		return true, ""
	})
	var np networkingv1.NetworkPolicy
	if !get(t, c, name, &np) || len(np.Spec.Ingress) != 1 || len(np.Spec.Egress) != 2 {
		t.Errorf("NetworkPolicy rules: %+v", np.Spec)
	}
}

// assertOnlyDenyAll checks that nothing of the plugin runs: no workload
// objects, no allow-list key, and a NetworkPolicy that allows nothing.
func assertOnlyDenyAll(t *testing.T, c client.Client, name string) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, name+" torn down", func() (bool, string) {
		for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ServiceAccount{}, &corev1.ConfigMap{}} {
			if get(t, c, name, obj) {
				return false, "workload object remains"
			}
		}
		var np networkingv1.NetworkPolicy
		if !get(t, c, name, &np) {
			return false, "no NetworkPolicy"
		}
		if len(np.Spec.Ingress)+len(np.Spec.Egress) != 0 || len(np.Spec.PolicyTypes) != 2 {
			return false, "NetworkPolicy is not deny-all"
		}
		if _, ok := allowList(t, c, name); ok {
			return false, "allow-list key remains"
		}
		return true, ""
	})
}
