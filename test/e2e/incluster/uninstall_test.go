//go:build cluster

package incluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/platform"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// dataKinds are what `platform uninstall` keeps without --delete-data: the
// owner's Plugins and PluginGrants live in the CRDs and the namespace, the
// core's database on the claim.
var dataKinds = []string{"CustomResourceDefinition", "Namespace", "PersistentVolumeClaim"}

// operatorKinds are the kinds of what the operator makes for a plugin and
// for the proxy (internal/platform's uninstall deletes these by label).
var operatorKinds = []schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Version: "v1", Kind: "Service"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"},
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "ServiceAccount"},
	{Version: "v1", Kind: "Secret"},
}

// testUninstall runs a plugin, then uninstalls the platform: every object
// the install applied but the data (dataKinds) is gone, and so is every
// object the operator made; the plugin's and the platform's containers are
// gone from the node (kubelet folders, runc state, processes); the Plugin,
// its grant, the CRDs, the namespace and the core's claim with its database
// stay. `--delete-data` then removes the claim, the CRDs and the namespace.
// It is the last phase: the platform is gone afterwards.
func testUninstall(t *testing.T, e *platformEnv) {
	ctx := context.Background()
	c := mustClient(t, e.c)
	const instance = "fx-last"
	ref := e.preg.publishNBPFx(t, e.root, e.signer, e.nbp.CAPEM())
	openfief(t, e.kubeconfig, "plugin", "install", instance, "--image", ref.String(), "--signers", e.signersFile, "--insecure-registry", e.preg.bridge)
	openfief(t, e.kubeconfig, "plugin", "approve", instance, "--yes")
	runningPluginPod(t, e.cs, instance)

	// The owner keeps the record: a final backup (--stop: the core calls
	// no plugin after it) of a record holding fx-last's rates, which the
	// release phase restores after --delete-data and a new install.
	synced := waitCoreStatus(t, e, instance, 2*time.Minute, instance+"'s rates stored before the backup", func(s coreStatus) bool {
		return s.succeeded && s.fxRates > 0
	})
	backup := filepath.Join(e.work, "core.backup")
	e.backupRecordRows = backupRowCount(t, openfief(t, e.kubeconfig, "core", "backup", "-o", backup, "--stop"))
	e.backup, e.backupInstance, e.backupRows = backup, instance, synced.rows

	// What there is before: the platform's objects, the operator's, every
	// pod with its containers on the node, and the core's database.
	owned, err := platform.Owned(ctx, c)
	must(t, err)
	for _, kind := range []string{"Namespace", "CustomResourceDefinition", "PersistentVolumeClaim", "ServiceAccount", "ClusterRole",
		"ClusterRoleBinding", "Role", "RoleBinding", "Service", "NetworkPolicy", "Deployment", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		if !slices.ContainsFunc(owned, func(u *unstructured.Unstructured) bool { return u.GetKind() == kind }) {
			t.Errorf("before the uninstall the platform owns no %s: the check below would prove nothing of it", kind)
		}
	}
	made := operatorObjects(t, c)
	for _, kind := range []string{"Deployment", "Service", "NetworkPolicy", "ServiceAccount", "ConfigMap"} {
		if !slices.ContainsFunc(made, func(u *unstructured.Unstructured) bool {
			return u.GetKind() == kind && (u.GetLabels()[plugins.LabelPluginName] == instance || kind == "ConfigMap")
		}) {
			t.Errorf("before the uninstall the operator made no %s for plugin %s", kind, instance)
		}
	}
	pods := listPods(t, e, "")
	traces := map[types.UID][]string{}
	for _, p := range pods {
		var ids []string
		for _, st := range p.Status.ContainerStatuses {
			ids = append(ids, st.ContainerID)
		}
		traces[p.UID] = ids
		if left := e.c.PodTraces(string(p.UID), ids); !slices.ContainsFunc(left, func(s string) bool { return strings.HasPrefix(s, "process ") }) {
			t.Errorf("pod %s: no process of it found on the node before the uninstall (%v): the check below would prove nothing", p.Name, left)
		}
	}
	pvc, err := e.cs.CoreV1().PersistentVolumeClaims(plugins.Namespace).Get(ctx, "openfief-core-data", metav1.GetOptions{})
	must(t, err)
	db := filepath.Join(e.c.VolumeDir(pvc.Spec.VolumeName), "core.db")
	dbBefore, err := os.Stat(db)
	if err != nil {
		t.Fatalf("the core's database on its volume: %v", err)
	}

	start := time.Now()
	code, out := e.cli(ctx, "platform", "uninstall", "--yes", "--timeout", "3m")
	t.Logf("openfief platform uninstall: exit %d in %s\n%s", code, time.Since(start).Round(100*time.Millisecond), out)
	if code != cli.ExitOK {
		t.Fatalf("openfief platform uninstall exited %d", code)
	}

	// The platform: only the data is left of what the install applied.
	after, err := platform.Owned(ctx, c)
	must(t, err)
	var kept []string
	for _, u := range after {
		if !slices.Contains(dataKinds, u.GetKind()) {
			t.Errorf("platform uninstall left %s %s", u.GetKind(), u.GetName())
		}
		kept = append(kept, u.GetKind()+" "+u.GetName())
	}
	for _, u := range owned {
		if !slices.Contains(dataKinds, u.GetKind()) {
			expectGone(t, c, u)
		} else if !slices.Contains(kept, u.GetKind()+" "+u.GetName()) {
			t.Errorf("platform uninstall without --delete-data removed %s %s", u.GetKind(), u.GetName())
		}
	}
	// The operator's objects, found again by label and by name.
	for _, u := range operatorObjects(t, c) {
		t.Errorf("platform uninstall left the operator's %s %s", u.GetKind(), u.GetName())
	}
	for _, u := range made {
		expectGone(t, c, u)
	}
	if left := listPods(t, e, ""); len(left) > 0 {
		t.Errorf("platform uninstall left %d pods, e.g. %s", len(left), left[0].Name)
	}
	// The containers, on the node: the kubelet removes a pod's folder and
	// containerd its containers a little after the pod object goes.
	testutil.Eventually(t, time.Minute, "every pod's containers gone from the node", func() (bool, string) {
		var left []string
		for uid, ids := range traces {
			left = append(left, e.c.PodTraces(string(uid), ids)...)
		}
		return len(left) == 0, strings.Join(left, "; ")
	})

	// The owner's data.
	var plugin v1alpha1.Plugin
	if err := c.Get(ctx, client.ObjectKey{Namespace: plugins.Namespace, Name: instance}, &plugin); err != nil {
		t.Errorf("the Plugin %s after platform uninstall: %v", instance, err)
	}
	var grant v1alpha1.PluginGrant
	if err := c.Get(ctx, client.ObjectKey{Namespace: plugins.Namespace, Name: instance}, &grant); err != nil {
		t.Errorf("the PluginGrant %s after platform uninstall: %v", instance, err)
	}
	pvcAfter, err := e.cs.CoreV1().PersistentVolumeClaims(plugins.Namespace).Get(ctx, pvc.Name, metav1.GetOptions{})
	switch {
	case err != nil:
		t.Errorf("the core's claim after platform uninstall: %v", err)
	case pvcAfter.UID != pvc.UID || pvcAfter.Spec.VolumeName != pvc.Spec.VolumeName || pvcAfter.Status.Phase != corev1.ClaimBound:
		t.Errorf("the core's claim %s (volume %s) is now %s, volume %s, %s", pvc.UID, pvc.Spec.VolumeName, pvcAfter.UID, pvcAfter.Spec.VolumeName, pvcAfter.Status.Phase)
	}
	if dbAfter, err := os.Stat(db); err != nil || dbAfter.Size() < dbBefore.Size() {
		t.Errorf("the core's database %s after platform uninstall: %v (size %d before)", db, err, dbBefore.Size())
	}
	code, out = e.cli(ctx, "platform", "status")
	if code != cli.ExitNotFound {
		t.Errorf("openfief platform status after the uninstall: exit %d, want %d (not installed)\n%s", code, cli.ExitNotFound, out)
	}

	// --delete-data: the rest goes too.
	start = time.Now()
	code, out = e.cli(ctx, "platform", "uninstall", "--yes", "--delete-data", "--timeout", "3m")
	t.Logf("openfief platform uninstall --delete-data: exit %d in %s\n%s", code, time.Since(start).Round(100*time.Millisecond), out)
	if code != cli.ExitOK {
		t.Fatalf("openfief platform uninstall --delete-data exited %d", code)
	}
	for _, u := range owned {
		expectGone(t, c, u)
	}
	if after, err := platform.Owned(ctx, c); err != nil || len(after) > 0 {
		t.Errorf("after --delete-data the platform still owns %d objects (%v)", len(after), err)
	}
	if _, err := e.cs.CoreV1().Namespaces().Get(ctx, plugins.Namespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s after --delete-data: %v, want NotFound", plugins.Namespace, err)
	}
}

// operatorObjects lists what the operator made in the namespace (labelled
// plugins.LabelManagedBy=plugins.ValueManagedBy), of operatorKinds.
func operatorObjects(t *testing.T, c client.Client) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, gvk := range operatorKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		must(t, c.List(context.Background(), list, client.InNamespace(plugins.Namespace),
			client.MatchingLabels{plugins.LabelManagedBy: plugins.ValueManagedBy}))
		for i := range list.Items {
			u := &list.Items[i]
			u.SetGroupVersionKind(gvk)
			out = append(out, u)
		}
	}
	return out
}

// expectGone fails unless u is gone from the cluster, or going (a
// namespace or claim being finalized is gone for the owner).
func expectGone(t *testing.T, c client.Client, u *unstructured.Unstructured) {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(u.GroupVersionKind())
	err := c.Get(context.Background(), client.ObjectKeyFromObject(u), got)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Errorf("reading %s %s: %v", u.GetKind(), u.GetName(), err)
	case got.GetUID() != u.GetUID():
		// Made again under the same name: left all the same.
		t.Errorf("%s %s was made again after the uninstall (uid %s, was %s)", u.GetKind(), u.GetName(), got.GetUID(), u.GetUID())
	default:
		t.Errorf("%s %s is still there%s", u.GetKind(), u.GetName(), deleting(got))
	}
}

func deleting(u *unstructured.Unstructured) string {
	if ts := u.GetDeletionTimestamp(); ts != nil {
		return fmt.Sprintf(" (being deleted since %s, finalizers %v)", ts.UTC().Format(time.RFC3339), u.GetFinalizers())
	}
	return ""
}
