package deploy_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/arkadiuss/openfief/deploy"
)

// TestCoreRenders renders deploy/core as `kubectl apply -k` would and checks
// what the core's install promises (docs/core.md): least-privilege RBAC, a
// hardened single-writer Deployment with its database on a volume, the
// Service ports the operator and the CLI use, and the NetworkPolicy.
func TestCoreRenders(t *testing.T) {
	objs, err := deploy.Render("core")
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]map[string]any{}
	var keys []string
	for _, u := range objs {
		k := u.GetKind() + "/" + u.GetName()
		keys = append(keys, k)
		byKey[k] = u.Object
		if u.GetKind() != "ClusterRole" && u.GetKind() != "ClusterRoleBinding" && u.GetNamespace() != "openfief" {
			t.Errorf("%s is in namespace %q, want openfief (D-15)", k, u.GetNamespace())
		}
	}
	slices.Sort(keys)
	want := []string{
		"ClusterRole/openfief-core-tokenreview", "ClusterRoleBinding/openfief-core-tokenreview",
		"Deployment/openfief-core", "NetworkPolicy/openfief-core", "PersistentVolumeClaim/openfief-core-data",
		"PodDisruptionBudget/openfief-core", "Role/openfief-core", "Role/openfief-owner", "RoleBinding/openfief-core", "Service/openfief-core",
		"ServiceAccount/openfief-core", "ServiceAccount/openfief-owner",
	}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Fatalf("rendered objects (-want +got):\n%s", diff)
	}
	conv := func(k string, into any) {
		t.Helper()
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(byKey[k], into); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}

	var role rbacv1.Role
	conv("Role/openfief-core", &role)
	wantRules := []rbacv1.PolicyRule{
		{APIGroups: []string{"openfief.io"}, Resources: []string{"plugins"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{"openfief-core"}, Verbs: []string{"create"}},
	}
	if diff := cmp.Diff(wantRules, role.Rules); diff != "" {
		t.Errorf("Role rules (-want +got):\n%s", diff)
	}
	var cr rbacv1.ClusterRole
	conv("ClusterRole/openfief-core-tokenreview", &cr)
	if diff := cmp.Diff([]rbacv1.PolicyRule{{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}}}, cr.Rules); diff != "" {
		t.Errorf("ClusterRole rules (-want +got):\n%s", diff)
	}
	for _, k := range []string{"RoleBinding/openfief-core", "ClusterRoleBinding/openfief-core-tokenreview"} {
		var b rbacv1.RoleBinding
		conv(k, &b)
		if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != "openfief-core" || b.Subjects[0].Namespace != "openfief" {
			t.Errorf("%s binds %v, want only the core's ServiceAccount", k, b.Subjects)
		}
	}

	var dep appsv1.Deployment
	conv("Deployment/openfief-core", &dep)
	spec := dep.Spec.Template.Spec
	if *dep.Spec.Replicas != 1 || dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("replicas %d, strategy %s: want one writer, Recreate", *dep.Spec.Replicas, dep.Spec.Strategy.Type)
	}
	if spec.ServiceAccountName != "openfief-core" || spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		t.Errorf("serviceAccountName %q, enableServiceLinks %v", spec.ServiceAccountName, spec.EnableServiceLinks)
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and RuntimeDefault seccomp", psc)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v: want read-only root, no escalation, all capabilities dropped", sc)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	db := ""
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--database="); ok {
			db = v
		}
	}
	if mounts["data"] == "" || !strings.HasPrefix(db, mounts["data"]+"/") {
		t.Errorf("--database=%q is not on the data volume (mounted at %q)", db, mounts["data"])
	}
	pvc := false
	for _, v := range spec.Volumes {
		if v.Name == "data" && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "openfief-core-data" {
			pvc = true
		}
	}
	if !pvc {
		t.Error("the data volume is not the openfief-core-data claim")
	}

	var svc corev1.Service
	conv("Service/openfief-core", &svc)
	ports := map[string][2]int32{}
	for _, p := range svc.Spec.Ports {
		ports[p.Name] = [2]int32{p.Port, p.TargetPort.IntVal}
	}
	// The operator reads the port named "connect" (--core-port) and needs a
	// numeric targetPort; the CLI proxies to "owner".
	if diff := cmp.Diff(map[string][2]int32{"connect": {8080, 8080}, "owner": {8081, 8081}}, ports); diff != "" {
		t.Errorf("Service ports (-want +got):\n%s", diff)
	}
	if svc.Spec.Selector["app.kubernetes.io/name"] != "openfief-core" || dep.Spec.Template.Labels["app.kubernetes.io/name"] != "openfief-core" {
		t.Error("the Service does not select the core's pods")
	}

	var np networkingv1.NetworkPolicy
	conv("NetworkPolicy/openfief-core", &np)
	if len(np.Spec.PolicyTypes) != 2 {
		t.Errorf("policyTypes %v: want Ingress and Egress", np.Spec.PolicyTypes)
	}
	pluginIngress := false
	for _, r := range np.Spec.Ingress {
		for _, f := range r.From {
			if f.PodSelector != nil && f.PodSelector.MatchLabels["app.kubernetes.io/name"] == "openfief-plugin" &&
				len(r.Ports) == 1 && r.Ports[0].Port.IntVal == 8080 {
				pluginIngress = true
			}
		}
	}
	if !pluginIngress {
		t.Error("plugins are not admitted to the plugin API (8080)")
	}
	checkCorePolicyPeers(t, &np, corePlaceholder)
}

// corePlaceholder is the API server address deploy/core's NetworkPolicy
// names as committed: TEST-NET-1 (RFC 5737), where no API server is.
const corePlaceholder = "192.0.2.1/32"

// checkCorePolicyPeers checks that every rule of the core's NetworkPolicy
// names its peers: the owner port admits only
// apiServer, and the egress to 443 and 6443 goes only to apiServer.
func checkCorePolicyPeers(t *testing.T, np *networkingv1.NetworkPolicy, apiServer string) {
	t.Helper()
	for i, r := range np.Spec.Ingress {
		if len(r.From) == 0 {
			t.Errorf("ingress rule %d admits every source", i)
		}
	}
	for i, r := range np.Spec.Egress {
		if len(r.To) == 0 {
			t.Errorf("egress rule %d admits every destination", i)
		}
	}
	ownerFrom, apiTo := 0, 0
	for _, r := range np.Spec.Ingress {
		if !slices.ContainsFunc(r.Ports, func(p networkingv1.NetworkPolicyPort) bool { return p.Port.IntVal == 8081 }) {
			continue
		}
		for _, f := range r.From {
			if f.IPBlock == nil || f.PodSelector != nil || f.NamespaceSelector != nil || f.IPBlock.CIDR != apiServer {
				t.Errorf("the owner port admits %+v, want only the API server at %s", f, apiServer)
			}
			ownerFrom++
		}
	}
	for _, r := range np.Spec.Egress {
		if !slices.ContainsFunc(r.Ports, func(p networkingv1.NetworkPolicyPort) bool { return p.Port.IntVal == 443 || p.Port.IntVal == 6443 }) {
			continue
		}
		for _, to := range r.To {
			if to.IPBlock == nil || to.PodSelector != nil || to.NamespaceSelector != nil || to.IPBlock.CIDR != apiServer {
				t.Errorf("the egress to the API server's ports goes to %+v, want only %s", to, apiServer)
			}
			apiTo++
		}
	}
	if ownerFrom == 0 || apiTo == 0 {
		t.Errorf("%d peers of the owner port, %d of the API server egress: want both named", ownerFrom, apiTo)
	}
}

// TestCorePolicyOverlay applies the patch deploy/core/networkpolicy.yaml's
// comment tells an installer to use, taken from that comment, in an overlay
// of deploy/core, and checks that it names the API server in both rules.
func TestCorePolicyOverlay(t *testing.T) {
	raw, err := os.ReadFile("core/networkpolicy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var patch []string
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		body, comment := strings.CutPrefix(line, "#   ")
		switch {
		case comment && strings.TrimSpace(body) == "patches:":
			in = true
		case in && comment && strings.HasPrefix(body, "  "):
		default:
			in = false
		}
		if in {
			patch = append(patch, body)
		}
	}
	if len(patch) < 3 {
		t.Fatalf("no patch found in the manifest's comment: %q", patch)
	}
	base, err := filepath.Abs("core")
	if err != nil {
		t.Fatal(err)
	}
	overlay := t.TempDir()
	rel, err := filepath.Rel(overlay, base) // kustomize takes no absolute base
	if err != nil {
		t.Fatal(err)
	}
	kustomization := "resources:\n  - " + rel + "\n" + strings.Join(patch, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o600); err != nil {
		t.Fatal(err)
	}
	objs, err := deploy.Render(overlay)
	if err != nil {
		t.Fatalf("%v\n%s", err, kustomization)
	}
	for _, u := range objs {
		if u.GetKind() != "NetworkPolicy" {
			continue
		}
		var np networkingv1.NetworkPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &np); err != nil {
			t.Fatal(err)
		}
		checkCorePolicyPeers(t, &np, "10.0.0.2/32")
		return
	}
	t.Fatal("the overlay renders no NetworkPolicy")
}
