//go:build cluster

package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	imagebuild "github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/platform"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/release/overlay"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// platformKinds are the kinds the platform's objects are of, to count
// every object of them in the cluster.
var platformKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Namespace"},
	{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
	{Version: "v1", Kind: "ServiceAccount"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "PersistentVolumeClaim"},
	{Version: "v1", Kind: "Service"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"},
	{Group: "apps", Version: "v1", Kind: "Deployment"},
}

// countObjects counts every object of platformKinds in the cluster, in
// every namespace, by kind, leaving out what Kubernetes' own controllers
// write on their own time (see clusterOwned).
func countObjects(t *testing.T, c client.Client) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, gvk := range platformKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(context.Background(), list); err != nil {
			t.Fatalf("list %s: %v", gvk.Kind, err)
		}
		n := 0
		for i := range list.Items {
			if !clusterOwned(gvk.Kind, &list.Items[i]) {
				n++
			}
		}
		out[gvk.Kind] = n
	}
	return out
}

// clusterOwned reports objects the control plane creates by itself, at
// times no test controls: the controller manager's ServiceAccounts in the
// kube-* namespaces (one per controller, as each starts), every
// namespace's default ServiceAccount and its kube-root-ca.crt ConfigMap.
// A fresh control plane still adds these while a test runs (a CI run once
// counted 40 ServiceAccounts, then 42, around two dry runs), and none of
// them is anything the platform's install would write.
func clusterOwned(kind string, o *unstructured.Unstructured) bool {
	switch {
	case strings.HasPrefix(o.GetNamespace(), "kube-"):
		return true
	case kind == "ServiceAccount" && o.GetName() == "default":
		return true
	case kind == "ConfigMap" && o.GetName() == "kube-root-ca.crt":
		return true
	}
	return false
}

// platformOverlay writes a platform overlay of version with images named
// after word, under dir/name, and returns its directory. extra, when set,
// is one more object (YAML) added by a kustomization on top, as an admin's
// own overlay adds one.
func platformOverlay(t *testing.T, dir, name, version, word, extra string) string {
	t.Helper()
	root, err := imagebuild.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	refs := testRefsFor(t, word)
	base := filepath.Join(dir, name+"-release")
	if err := overlay.WritePlatform(base, filepath.Join(root, "deploy"), overlay.Platform{
		Refs: refs, Version: version, RegistryConfig: true, Header: "test overlay " + name,
	}); err != nil {
		t.Fatal(err)
	}
	if extra == "" {
		return base
	}
	out := filepath.Join(dir, name)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(out, "extra.yaml"), extra)
	writeFile(t, filepath.Join(out, "kustomization.yaml"), "resources:\n  - ../"+name+"-release\n  - extra.yaml\n")
	return out
}

// testRefsFor are the three platform images and the check probe (named in
// the ConfigMap openfief-release, OF-29), named after word.
func testRefsFor(t *testing.T, word string) map[string]plugins.ImageRef {
	t.Helper()
	refs := map[string]plugins.ImageRef{}
	for _, n := range []string{"operator", "egress-proxy", "openfief-core", overlay.CheckProbe} {
		ref, err := plugins.ParseImageRef("registry.example.com/openfief/" + n + "@" + testutil.Digest(word+"-"+n))
		if err != nil {
			t.Fatal(err)
		}
		refs[n] = ref
	}
	return refs
}

// apiServerAddresses are the addresses of the EndpointSlices of
// default/kubernetes, as /32 or /128, sorted.
func apiServerAddresses(t *testing.T, c client.Client) []string {
	t.Helper()
	var epSlices discoveryv1.EndpointSliceList
	if err := c.List(context.Background(), &epSlices, client.InNamespace("default"), client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range epSlices.Items {
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				if strings.Contains(a, ":") {
					out = append(out, a+"/128")
				} else {
					out = append(out, a+"/32")
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// corePolicyPeers are the ipBlock CIDRs of the core's NetworkPolicy's
// owner-port ingress rule and API server egress rule.
func corePolicyPeers(t *testing.T, c client.Client) (ingress, egress []string) {
	t.Helper()
	var np networkingv1.NetworkPolicy
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: plugins.Namespace, Name: "openfief-core"}, &np); err != nil {
		t.Fatal(err)
	}
	for _, r := range np.Spec.Ingress {
		for _, p := range r.From {
			if p.IPBlock != nil {
				ingress = append(ingress, p.IPBlock.CIDR)
			}
		}
	}
	for _, r := range np.Spec.Egress {
		for _, p := range r.To {
			if p.IPBlock != nil {
				egress = append(egress, p.IPBlock.CIDR)
			}
		}
	}
	return ingress, egress
}

// TestPlatformLifecycle runs `openfief platform` as docs/operator.md's
// Install section does, on a control plane whose controllers act under
// their own identities (so deploy/admission's policy is live) and kwok
// plays the pods: a dry run that changes nothing, install (the CRDs, the
// policy, the operator, proxy and core Available, the operator's first
// publications (the test stands in) waited for, every object under the
// field manager openfief-platform, the API server's addresses taken from
// its EndpointSlice), status, an upgrade to new images that prunes what the
// new version dropped and leaves a running plugin alone, a refused
// downgrade, a wait that runs out naming the Deployment and why, a
// rollback, then uninstall (the platform and the plugin's workload gone, the
// data kept) and uninstall --delete-data (the rest gone).
func TestPlatformLifecycle(t *testing.T) {
	pc := newPlatformCluster(t)
	k, c := pc.kube, pc.kube.c
	ctx := context.Background()
	dir := t.TempDir()
	legacy := `apiVersion: v1
kind: ConfigMap
metadata:
  name: openfief-legacy
  namespace: openfief
  labels:
    app.kubernetes.io/version: v0.1.0
data:
  note: dropped in v0.2.0
`
	v1 := platformOverlay(t, dir, "v1", "v0.1.0", "one", legacy)
	v2 := platformOverlay(t, dir, "v2", "v0.2.0", "two", "")
	run := func(args ...string) result {
		t.Helper()
		start := time.Now()
		r := openfief(t, k, runOpts{}, args...)
		t.Logf("openfief %s: exit %d in %s", strings.Join(args, " "), r.code, time.Since(start).Round(100*time.Millisecond))
		return r
	}

	// The admin provides the volume deploy/core's claim binds to: this
	// cluster has no storage provisioner.
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "openfief-core-data"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/openfief-test-core"}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: plugins.Namespace, Name: "openfief-core-data"},
		},
	}
	must(t, c.Create(ctx, pv))
	want := apiServerAddresses(t, c)
	if len(want) == 0 {
		t.Fatal("the API server publishes no address in the EndpointSlices of default/kubernetes")
	}

	// A dry run prints every object, deterministically, and changes nothing.
	before := countObjects(t, c)
	dry := run("platform", "install", "--overlay", v1, "--dry-run")
	expect(t, dry, ExitOK, "API server: "+strings.Join(want, ", ")+" (from the EndpointSlices of Service default/kubernetes)")
	if again := run("platform", "install", "--overlay", v1, "--dry-run"); again.out != dry.out {
		t.Errorf("two dry runs printed different objects:\n%s\n---- and ----\n%s", dry.out, again.out)
	}
	set, err := platform.Load(v1)
	must(t, err)
	if n := strings.Count(dry.out, "---\n"); n != len(set.Objects) || n < 30 {
		t.Errorf("the dry run printed %d objects, the overlay renders %d", n, len(set.Objects))
	}
	for _, s := range []string{"kind: CustomResourceDefinition", "kind: ValidatingAdmissionPolicyBinding", "app.kubernetes.io/managed-by: openfief-platform",
		"cidr: " + want[0], "--registry-config=/etc/openfief/registry/config.json", "name: openfief-legacy"} {
		if !strings.Contains(dry.out, s) {
			t.Errorf("the dry run lacks %q", s)
		}
	}
	if strings.Contains(dry.out, "192.0.2.1/32") {
		t.Error("the dry run still names the API server placeholder")
	}
	// --api-server-cidr names the API server instead; an overlay that
	// already names it is kept, and the flag is refused on it.
	r := run("platform", "install", "--overlay", v1, "--dry-run", "--api-server-cidr", "10.9.8.7,fd00::7")
	expect(t, r, ExitOK, "API server: 10.9.8.7/32, fd00::7/128 (from --api-server-cidr)", "cidr: 10.9.8.7/32", "cidr: fd00::7/128")
	named := filepath.Join(dir, "named")
	root, err := imagebuild.FindRoot(".")
	must(t, err)
	must(t, overlay.WritePlatform(named, filepath.Join(root, "deploy"), overlay.Platform{
		Refs: testRefsFor(t, "named"), Version: "v0.1.0", APIServerCIDRs: []string{"10.1.1.1"}}))
	expect(t, run("platform", "install", "--overlay", named, "--dry-run"), ExitOK, "API server: kept the addresses the overlay names", "cidr: 10.1.1.1/32")
	expect(t, run("platform", "install", "--overlay", named, "--dry-run", "--api-server-cidr", "10.9.8.7"), ExitUsage, "the overlay already names the API server")
	if after := countObjects(t, c); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the dry runs changed the cluster: %v before, %v after", before, after)
	}

	// Before the install, check --pre passes what an install needs, and
	// says what is missing for someone without the admin's rights.
	r = run("check", "--pre")
	t.Logf("check --pre before the install:\n%s", r)
	expect(t, r, ExitOK, "✔ all ")
	expectCheckLines(t, r.out, preCheckLines())
	r = openfief(t, impersonating(t, k, "someone"), runOpts{}, "check", "--pre")
	t.Logf("check --pre by someone without rights:\n%s", r)
	expect(t, r, ExitFailure)
	expectCheckLines(t, r.out, deniedPreCheckLines())

	// Install: Available once the Deployments are and the operator (the
	// test, standing in) has published what it writes at start.
	published := publishAsOperator(t, pc)
	r = run("platform", "install", "--overlay", v1, "--timeout", "3m")
	expect(t, r, ExitOK, "installing the platform, version v0.1.0", "CustomResourceDefinition plugins.openfief.io is Established",
		"Deployment openfief/openfief-operator: Available (1/1)", "Deployment openfief/openfief-egress-proxy: Available (2/2)",
		"Deployment openfief/openfief-core: Available (1/1)",
		"waiting for Deployment openfief/openfief-operator to lead and publish ConfigMap openfief-egress-allowlist, openfief-sa-jwks, openfief-sigstore-root-status\n"+
			"Deployment openfief/openfief-operator: published openfief-egress-allowlist, openfief-sa-jwks, openfief-sigstore-root-status\n"+
			"the platform v0.1.0 is Available",
		"warning: Deployment openfief-operator mounts Secret openfief/openfief-registry-config, which does not exist")
	for _, u := range set.Objects {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(u.GroupVersionKind())
		must(t, c.Get(ctx, client.ObjectKeyFromObject(u), got))
		managers := []string{}
		for _, m := range got.GetManagedFields() {
			if m.Operation == metav1.ManagedFieldsOperationApply {
				managers = append(managers, m.Manager)
			}
		}
		if !slices.Contains(managers, "openfief-platform") || got.GetLabels()["app.kubernetes.io/managed-by"] != "openfief-platform" {
			t.Errorf("%s %s: appliers %v, labels %v: want the field manager and label openfief-platform", u.GetKind(), u.GetName(), managers, got.GetLabels())
		}
	}
	ingress, egress := corePolicyPeers(t, c)
	if fmt.Sprint(ingress) != fmt.Sprint(want) || fmt.Sprint(egress) != fmt.Sprint(want) {
		t.Errorf("the core's NetworkPolicy names the API server as %v (ingress) and %v (egress), want %v from the EndpointSlice", ingress, egress, want)
	}
	expect(t, run("platform", "install", "--overlay", v1), ExitNothingToDo, "already installed (version v0.1.0)")

	// check right after the install: everything passes but the core, which
	// kwok cannot run.
	r = run("check")
	t.Logf("check after the install:\n%s", r)
	published()
	expect(t, r, ExitFailure, "Error: 2 checks failed, the first: core answers")
	expectCheckLines(t, r.out, installedCheckLines())
	r = run("check", "-o", "json")
	expect(t, r, ExitFailure)
	expectCheckJSON(t, r.out, installedCheckLines())
	expect(t, run("check", "--pre"), ExitFailure, "✖ namespace openfief: the platform is already installed (version v0.1.0)")

	// Status.
	r = run("platform", "status")
	expect(t, r, ExitOK, "Version:  v0.1.0", "openfief-workload-identities: policy openfief-workload-identities, Deny, bound")
	for _, name := range []string{"openfief-operator", "openfief-egress-proxy", "openfief-core"} {
		line := lineWith(r.out, name+" ")
		var d appsv1.Deployment
		must(t, c.Get(ctx, client.ObjectKey{Namespace: plugins.Namespace, Name: name}, &d))
		ready := fmt.Sprintf("%d/%d", *d.Spec.Replicas, *d.Spec.Replicas)
		if !strings.Contains(line, "True") || !strings.Contains(line, ready) || !strings.Contains(line, "v0.1.0") ||
			!strings.Contains(line, testutil.Digest("one-"+map[string]string{"openfief-operator": "operator", "openfief-egress-proxy": "egress-proxy", "openfief-core": "openfief-core"}[name])) {
			t.Errorf("status line of %s: %q\n%s", name, line, r)
		}
	}

	// The version, as kubectl version shows the server's, and what needs
	// attention: every component is Available, but no core answers here
	// (kwok runs no container), which is the one line.
	r = run("version")
	expect(t, r, ExitOK, "Client Version:", "Platform Version:  v0.1.0", "  openfief-core: v0.1.0", "  openfief-operator: v0.1.0")
	r = run("version", "-o", "json")
	expect(t, r, ExitOK, `"platformVersion": {`, `"installed": true`, `"version": "v0.1.0"`, `"name": "openfief-egress-proxy"`)
	r = run("status")
	expect(t, r, ExitAttention, "CoreUnreachable", "openfief platform status --kubeconfig")
	if strings.Contains(r.out, "PlatformUnavailable") || strings.Contains(r.errOut, "Note:") {
		t.Errorf("status of an Available platform:\n%s", r)
	}

	// A plugin's workload, as the operator makes it (as the operator, whom
	// the admission policy lets write plugin Deployments), and its Plugin.
	plugin := testutil.MakePlugin("fx", testutil.Image("fx")).Obj()
	must(t, c.Create(ctx, plugin))
	must(t, c.Create(ctx, testutil.GrantFor(plugin).Obj()))
	asOperator := operatorClient(t, pc)
	workload := pluginWorkload("fx")
	for _, o := range workload {
		must(t, asOperator.Create(ctx, o))
	}
	pod := waitPluginPod(t, c, "fx")

	// Upgrade to new images: the legacy ConfigMap is pruned, the plugin's
	// pod is left alone.
	r = run("platform", "upgrade", "--overlay", v2, "--timeout", "3m")
	expect(t, r, ExitOK, "upgrading the platform from v0.1.0 to v0.2.0", "pruned ConfigMap openfief/openfief-legacy (not in version v0.2.0)", "the platform v0.2.0 is Available")
	for name, image := range map[string]string{"openfief-operator": "operator", "openfief-egress-proxy": "egress-proxy", "openfief-core": "openfief-core"} {
		var d appsv1.Deployment
		must(t, c.Get(ctx, client.ObjectKey{Namespace: plugins.Namespace, Name: name}, &d))
		if got, want := d.Spec.Template.Spec.Containers[0].Image, "registry.example.com/openfief/"+image+"@"+testutil.Digest("two-"+image); got != want || d.Labels["app.kubernetes.io/version"] != "v0.2.0" {
			t.Errorf("%s runs %s at version %s after the upgrade, want %s at v0.2.0", name, got, d.Labels["app.kubernetes.io/version"], want)
		}
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: plugins.Namespace, Name: "openfief-legacy"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ConfigMap v0.2.0 dropped: %v, want it pruned", err)
	}
	if now := waitPluginPod(t, c, "fx"); now.UID != pod.UID {
		t.Errorf("the plugin's pod was replaced by the upgrade: %s, then %s", pod.UID, now.UID)
	}

	// A downgrade is refused and changes nothing.
	before = countObjects(t, c)
	expect(t, run("platform", "upgrade", "--overlay", v1), ExitInvalid, "v0.1.0 is older than the installed v0.2.0: refusing a downgrade")
	if after := countObjects(t, c); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the refused downgrade changed the cluster: %v before, %v after", before, after)
	}

	// A version whose core cannot be scheduled: the wait runs out and says
	// which Deployment and why.
	v3 := platformOverlay(t, dir, "v3", "v0.3.0", "three", "")
	writeFile(t, filepath.Join(dir, "v3-release", "kustomization.yaml"), readFile(t, filepath.Join(dir, "v3-release", "kustomization.yaml"))+
		"patches:\n  - target: {kind: Deployment, name: openfief-core}\n    patch: |-\n      - {op: add, path: /spec/template/spec/nodeSelector, value: {nowhere: \"true\"}}\n")
	r = run("platform", "upgrade", "--overlay", v3, "--timeout", "20s")
	t.Logf("the upgrade that ran out:\n%s", r)
	expect(t, r, ExitFailure, "Deployment openfief/openfief-core did not become Available", "Available=False (MinimumReplicasUnavailable)", "PodScheduled=False (Unschedulable)")

	// A rollback to v0.2.0 on purpose.
	r = run("platform", "upgrade", "--overlay", v2, "--allow-downgrade", "--timeout", "3m")
	expect(t, r, ExitOK, "upgrading the platform from v0.3.0 to v0.2.0", "the platform v0.2.0 is Available")

	// Uninstall: the platform and the plugin's workload go, the owner's
	// data stays.
	expect(t, run("platform", "uninstall"), ExitNotConfirmed, "--yes")
	r = run("platform", "uninstall", "--yes", "--timeout", "2m")
	expect(t, r, ExitOK, "deleted Deployment openfief/openfief-operator", "deleted every plugin workload the operator made",
		"kept PersistentVolumeClaim openfief/openfief-core-data", "the platform is uninstalled")
	for _, o := range append(workload, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: plugins.Namespace, Name: "openfief-core"}}) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s after uninstall: %v, want it gone", o, o.GetName(), err)
		}
	}
	var pods corev1.PodList
	must(t, c.List(ctx, &pods, client.InNamespace(plugins.Namespace)))
	if len(pods.Items) != 0 {
		t.Errorf("%d pods left in openfief after uninstall, e.g. %s", len(pods.Items), pods.Items[0].Name)
	}
	var owned unstructured.UnstructuredList
	owned.SetGroupVersionKind(schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyList"})
	must(t, c.List(ctx, &owned, client.MatchingLabels{"app.kubernetes.io/part-of": "openfief"}))
	if len(owned.Items) != 0 {
		t.Errorf("%d admission policies left after uninstall", len(owned.Items))
	}
	for _, o := range []client.Object{&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: plugins.Namespace, Name: "openfief-core-data"}}, plugin} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Errorf("%T %s after uninstall: %v, want it kept", o, o.GetName(), err)
		}
	}
	expect(t, run("platform", "status"), ExitNotFound, "not installed")
	expect(t, run("version"), ExitOK, "Platform Version:  not installed")

	// Uninstall --delete-data: the claim, the CRDs with the Plugin and the
	// namespace go too.
	r = run("platform", "uninstall", "--yes", "--delete-data", "--timeout", "2m")
	expect(t, r, ExitOK, "deleted PersistentVolumeClaim openfief/openfief-core-data", "Namespace openfief is gone")
	if err := c.Get(ctx, client.ObjectKey{Name: plugins.Namespace}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace openfief after uninstall --delete-data: %v, want it gone", err)
	}
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := c.Get(ctx, client.ObjectKey{Name: "plugins.openfief.io"}, crd); !apierrors.IsNotFound(err) {
		t.Errorf("CRD plugins.openfief.io after uninstall --delete-data: %v, want it gone", err)
	}
	expect(t, run("platform", "uninstall", "--yes"), ExitNothingToDo, "not installed")
}

// operatorClient acts as the operator's ServiceAccount (impersonated by
// the admin), as the admission policy requires of plugin workloads.
func operatorClient(t *testing.T, pc *platformCluster) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(pc.cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:openfief:openfief-operator",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:openfief", "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: pc.kube.c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// pluginWorkload is what the operator makes for a running plugin, reduced
// to what uninstall must find: each object labelled as the operator's.
func pluginWorkload(name string) []client.Object {
	labels := map[string]string{plugins.LabelName: plugins.ValuePluginName, plugins.LabelManagedBy: plugins.ValueManagedBy, plugins.LabelPluginName: name}
	meta := metav1.ObjectMeta{Namespace: plugins.Namespace, Name: "plugin-" + name, Labels: labels}
	return []client.Object{
		&corev1.ServiceAccount{ObjectMeta: meta, AutomountServiceAccountToken: ptr.To(false)},
		&corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"config.json": "{}"}},
		&corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "connect", Port: 8080, TargetPort: intstr.FromInt32(8080)}}}},
		&networkingv1.NetworkPolicy{ObjectMeta: meta, Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: labels}, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}}},
		&appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: "plugin-" + name, AutomountServiceAccountToken: ptr.To(false),
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{Name: "plugin", Image: testutil.Image(name), SecurityContext: &corev1.SecurityContext{
						AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
				},
			},
		}},
	}
}

// waitPluginPod waits for the one Ready pod of plugin name and returns it.
func waitPluginPod(t *testing.T, c client.Client, name string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	testutil.Eventually(t, 60*time.Second, "a Ready pod of plugin "+name, func() (bool, string) {
		var pods corev1.PodList
		if err := c.List(context.Background(), &pods, client.InNamespace(plugins.Namespace), client.MatchingLabels{plugins.LabelPluginName: name}); err != nil {
			return false, err.Error()
		}
		if len(pods.Items) != 1 {
			return false, fmt.Sprintf("%d pods", len(pods.Items))
		}
		pod = pods.Items[0]
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, "not Ready"
	})
	return pod
}

// lineWith is the first line of s that contains sub, "" when none does.
func lineWith(s, sub string) string {
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
