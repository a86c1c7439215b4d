//go:build cluster

package admission

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// The tests install deploy/crds, deploy/admission and deploy/operator on a
// real kube-apiserver (the package's shared minimal control plane) exactly
// as `kubectl apply -k` renders them, then act as one
// identity after another through impersonation and check who the policy
// openfief-workload-identities lets run pods as OpenFief's identities.

// The identities the tests act as (rest.Config.Impersonate). asAdmin is the
// control plane's own identity, a member of system:masters: cluster-admin.
const (
	asAdmin            = ""
	asOperator         = "system:serviceaccount:openfief:openfief-operator"
	asRSController     = "system:serviceaccount:kube-system:replicaset-controller"
	asDeployController = "system:serviceaccount:kube-system:deployment-controller"
	asGC               = "system:serviceaccount:kube-system:generic-garbage-collector"
	asKCM              = "system:kube-controller-manager"
	// asMallory may write every workload kind in openfief (the Role
	// workloadWriter), and nothing else.
	asMallory = "mallory"
	// asInstaller has mallory's rights and the ClusterRole
	// openfief-platform-installer, bound in openfief.
	asInstaller = "platform-installer"
)

const (
	policyName  = "openfief-workload-identities"
	ns          = "openfief"
	pluginLabel = "openfief.io/plugin"
	testImage   = "registry.example.com/app@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	otherImage  = "registry.example.com/evil@sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

// admissionEnv is the control plane with the install manifests applied.
type admissionEnv struct {
	cluster *devcluster.Cluster
	scheme  *runtime.Scheme
}

var admissionSetup struct {
	sync.Mutex
	env    *admissionEnv
	failed bool
}

// admissionCluster returns the package's control plane with deploy/crds,
// deploy/admission and the operator's ServiceAccount, Role and RoleBinding
// applied, the test identities' RBAC in place and the policy enforced.
func admissionCluster(t *testing.T) *admissionEnv {
	t.Helper()
	admissionSetup.Lock()
	defer admissionSetup.Unlock()
	if admissionSetup.env != nil {
		return admissionSetup.env
	}
	if admissionSetup.failed {
		t.Fatal("setting up the admission tests failed in an earlier test")
	}
	admissionSetup.failed = true // until the end of this function
	crds, err := filepath.Abs("../crds")
	if err != nil {
		t.Fatal(err)
	}
	c := devcluster.Shared(t, devcluster.Options{CRDDirectoryPaths: []string{crds}})
	s, err := apiconv.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	env := &admissionEnv{cluster: c, scheme: s}
	admin := env.as(t, asAdmin)
	for _, dir := range []string{"../crds", "."} {
		for _, u := range render(t, dir) {
			applyUnstructured(t, admin, u)
		}
	}
	env.grantTestIdentities(t)
	env.waitEnforced(t)
	env.waitTokensEnforced(t)
	// The cluster admin installs the operator (its Deployment runs as
	// openfief-operator: rule 5 lets cluster-admin).
	for _, u := range render(t, "../operator") {
		applyUnstructured(t, admin, u)
	}
	admissionSetup.env, admissionSetup.failed = env, false
	return env
}

// render builds a kustomization as `kubectl apply -k` would.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := deploy.Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// applyUnstructured server-side applies u as kubectl would.
func applyUnstructured(t *testing.T, cl client.Client, u *unstructured.Unstructured) {
	t.Helper()
	err := cl.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kubectl"), client.ForceOwnership)
	if err != nil {
		t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// as returns a client acting as user (asAdmin: the cluster's own identity).
func (e *admissionEnv) as(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(e.cluster.Config)
	cfg.QPS, cfg.Burst = 200, 400
	if user != asAdmin {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	}
	cl, err := client.New(cfg, client.Options{Scheme: e.scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// grantTestIdentities lets every test identity write every workload kind,
// Secrets and ServiceAccount tokens in openfief, so whatever refuses them is the policy, not RBAC; and binds
// openfief-platform-installer to asInstaller.
func (e *admissionEnv) grantTestIdentities(t *testing.T) {
	t.Helper()
	admin := e.as(t, asAdmin)
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "workload-writer", Namespace: ns},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{
				"pods", "pods/ephemeralcontainers", "pods/status", "pods/resize", "replicationcontrollers",
				"secrets", "serviceaccounts", "serviceaccounts/token",
			}, Verbs: []string{"*"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "statefulsets", "daemonsets"}, Verbs: []string{"*"}},
			{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: []string{"*"}},
		},
	}
	user := func(name string) rbacv1.Subject {
		if sa, ok := strings.CutPrefix(name, "system:serviceaccount:"); ok {
			nsName, saName, _ := strings.Cut(sa, ":")
			return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: nsName, Name: saName}
		}
		return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
	}
	writers := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "workload-writers", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
	}
	for _, u := range []string{asOperator, asRSController, asDeployController, asGC, asKCM, asMallory, asInstaller, asKubelet, asCore} {
		writers.Subjects = append(writers.Subjects, user(u))
	}
	installer := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "platform-installer", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "openfief-platform-installer"},
		Subjects:   []rbacv1.Subject{user(asInstaller)},
	}
	for _, obj := range []client.Object{role, writers, installer} {
		if err := admin.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// waitEnforced waits until the API server enforces the policy (it loads
// policies from a watch) and fails on type-checking warnings.
func (e *admissionEnv) waitEnforced(t *testing.T) {
	t.Helper()
	mallory := e.as(t, asMallory)
	testutil.Eventually(t, 60*time.Second, "the policy to be enforced", func() (bool, string) {
		err := mallory.Create(context.Background(), pod("probe", "plugin-probe", nil), client.DryRunAll)
		if err == nil {
			return false, "a plugin pod was allowed"
		}
		return strings.Contains(err.Error(), policyName+" rule 1"), err.Error()
	})
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	if err := e.as(t, asAdmin).Get(context.Background(), client.ObjectKey{Name: policyName}, &vap); err != nil {
		t.Fatal(err)
	}
	if tc := vap.Status.TypeChecking; tc != nil && len(tc.ExpressionWarnings) > 0 {
		t.Fatalf("the policy's expressions have type-checking warnings: %+v", tc.ExpressionWarnings)
	}
}

// expectRule checks err: rule 0 means allowed, any other number that the
// policy refused with that rule, in a message naming the requester.
func expectRule(t *testing.T, user string, err error, rule int) {
	t.Helper()
	expectPolicyRule(t, user, err, policyName, rule)
}

// podSpec meets the restricted Pod Security Standard openfief enforces, so
// the policy, not PodSecurity, decides.
func podSpec(serviceAccount string) corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName:           serviceAccount,
		AutomountServiceAccountToken: ptr.To(false),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      ptr.To[int64](65532),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{container("app")},
	}
}

func container(name string) corev1.Container {
	return corev1.Container{
		Name:  name,
		Image: testImage,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

// podLabels is app=<name> plus extra.
func podLabels(name string, extra map[string]string) map[string]string {
	l := map[string]string{"app": name}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

func pod(name, serviceAccount string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: podLabels(name, labels)},
		Spec:       podSpec(serviceAccount),
	}
}

func template(name, serviceAccount string, labels map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels(name, labels)}, Spec: podSpec(serviceAccount)}
}

func selector(name string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
}

func deployment(name, serviceAccount string, labels map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1), Selector: selector(name), Template: template(name, serviceAccount, labels),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
		},
	}
}

func replicaSet(name, serviceAccount string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: selector(name), Template: template(name, serviceAccount, nil)},
	}
}

// otherWorkloads are one object of each other kind with a pod template.
func otherWorkloads(name, serviceAccount string) []client.Object {
	tmpl := template(name, serviceAccount, nil)
	jobTmpl := tmpl.DeepCopy()
	jobTmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	meta := func(kind string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name + "-" + kind, Namespace: ns}
	}
	return []client.Object{
		&appsv1.StatefulSet{ObjectMeta: meta("sts"), Spec: appsv1.StatefulSetSpec{Selector: selector(name), Template: tmpl}},
		&appsv1.DaemonSet{ObjectMeta: meta("ds"), Spec: appsv1.DaemonSetSpec{Selector: selector(name), Template: tmpl}},
		&batchv1.Job{ObjectMeta: meta("job"), Spec: batchv1.JobSpec{Template: *jobTmpl}},
		&batchv1.CronJob{ObjectMeta: meta("cron"), Spec: batchv1.CronJobSpec{
			Schedule: "0 * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: *jobTmpl}},
		}},
		&corev1.ReplicationController{ObjectMeta: meta("rc"), Spec: corev1.ReplicationControllerSpec{
			Selector: map[string]string{"app": name}, Template: &tmpl,
		}},
	}
}

// createReal creates obj as user, failing the test on an error.
func (e *admissionEnv) createReal(t *testing.T, user string, obj client.Object) {
	t.Helper()
	if err := e.as(t, user).Create(context.Background(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create %s as %q: %v", obj.GetName(), user, err)
	}
}

// tryUpdate re-reads obj as user, changes it and sends the update as a dry
// run (to subresource sub, when set), returning the API server's answer.
func tryUpdate[T client.Object](t *testing.T, cl client.Client, obj T, sub string, mutate func(T)) error {
	t.Helper()
	fresh := obj.DeepCopyObject().(T)
	if err := cl.Get(context.Background(), client.ObjectKeyFromObject(obj), fresh); err != nil {
		t.Fatal(err)
	}
	mutate(fresh)
	if sub != "" {
		return cl.SubResource(sub).Update(context.Background(), fresh, &client.SubResourceUpdateOptions{
			UpdateOptions: client.UpdateOptions{DryRun: []string{metav1.DryRunAll}},
		})
	}
	return cl.Update(context.Background(), fresh, client.DryRunAll)
}

func TestAdmissionPolicyPods(t *testing.T) {
	env := admissionCluster(t)
	deprecated := pod("deprecated-field", "", nil)
	deprecated.Spec.DeprecatedServiceAccount = "plugin-x"
	generated := pod("", "default", nil)
	generated.GenerateName = "plugin-x-"
	creates := []struct {
		name string
		as   string
		pod  *corev1.Pod
		rule int
	}{
		{"a plugin's ServiceAccount", asMallory, pod("sa-plugin", "plugin-x", nil), 1},
		{"the plugin label", asMallory, pod("label-plugin", "default", map[string]string{pluginLabel: "x"}), 1},
		{"a plugin's name", asMallory, pod("plugin-x-abcde", "default", nil), 1},
		{"a generated plugin name", asMallory, generated, 1},
		{"the deprecated serviceAccount field", asMallory, deprecated, 1},
		{"the core's ServiceAccount", asMallory, pod("sa-core", "openfief-core", nil), 1},
		{"the operator's ServiceAccount", asMallory, pod("sa-operator", "openfief-operator", nil), 1},
		{"the egress proxy's ServiceAccount", asMallory, pod("sa-proxy", "openfief-egress-proxy", nil), 1},
		{"cluster-admin", asAdmin, pod("admin-plugin", "plugin-x", nil), 1},
		{"the operator", asOperator, pod("operator-plugin", "plugin-x", nil), 1},
		{"the Deployment controller", asDeployController, pod("dc-plugin", "plugin-x", nil), 1},
		{"an ordinary pod", asMallory, pod("ordinary", "default", nil), 0},
		{"the ReplicaSet controller, plugin", asRSController, pod("rsc-plugin", "plugin-x", map[string]string{pluginLabel: "x"}), 0},
		{"the ReplicaSet controller, core", asRSController, pod("rsc-core", "openfief-core", nil), 0},
		{"the controller manager without ServiceAccount credentials", asKCM, pod("kcm-plugin", "plugin-x", nil), 0},
	}
	for _, tt := range creates {
		t.Run("create/"+tt.name, func(t *testing.T) {
			expectRule(t, tt.as, env.as(t, tt.as).Create(context.Background(), tt.pod, client.DryRunAll), tt.rule)
		})
	}

	running := pod("plugin-x-running", "plugin-x", map[string]string{pluginLabel: "x"})
	env.createReal(t, asRSController, running)
	ordinary := pod("mallory-pod", "default", nil)
	env.createReal(t, asMallory, ordinary)
	updates := []struct {
		name   string
		as     string
		pod    *corev1.Pod
		sub    string
		mutate func(*corev1.Pod)
		rule   int
	}{
		{"a plugin pod's image", asMallory, running, "", func(p *corev1.Pod) { p.Spec.Containers[0].Image = otherImage }, 1},
		{"a plugin pod's image, by the ReplicaSet controller", asRSController, running, "", func(p *corev1.Pod) { p.Spec.Containers[0].Image = otherImage }, 1},
		{"an ephemeral container in a plugin pod", asMallory, running, "ephemeralcontainers", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{
					Name: "debug", Image: otherImage, SecurityContext: container("debug").SecurityContext,
				},
			})
		}, 1},
		{"the plugin label on another pod", asMallory, ordinary, "", func(p *corev1.Pod) { p.Labels[pluginLabel] = "x" }, 1},
		{"a plugin pod's plugin label", asMallory, running, "", func(p *corev1.Pod) { p.Labels[pluginLabel] = "y" }, 1},
		{"another label on a plugin pod", asMallory, running, "", func(p *corev1.Pod) { p.Labels["team"] = "ops" }, 6},
		{"a plugin pod's owner references, by the garbage collector", asGC, running, "", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "gone", UID: "0000"}}
			p.Finalizers = append(p.Finalizers, "example.com/hold")
		}, 0},
	}
	for _, tt := range updates {
		t.Run("update/"+tt.name, func(t *testing.T) {
			expectRule(t, tt.as, tryUpdate(t, env.as(t, tt.as), tt.pod, tt.sub, tt.mutate), tt.rule)
		})
	}
}

func TestAdmissionPolicyDeployments(t *testing.T) {
	env := admissionCluster(t)
	plugin := map[string]string{pluginLabel: "x"}
	creates := []struct {
		name       string
		as         string
		deployment *appsv1.Deployment
		rule       int
	}{
		{"a plugin's ServiceAccount", asMallory, deployment("sa-plugin", "plugin-x", nil), 4},
		{"a plugin's name", asMallory, deployment("plugin-y", "default", nil), 4},
		{"the plugin label", asMallory, deployment("label-plugin", "default", plugin), 4},
		{"cluster-admin, plugin", asAdmin, deployment("admin-plugin", "plugin-x", plugin), 4},
		{"the platform installer, plugin", asInstaller, deployment("installer-plugin", "plugin-x", plugin), 4},
		{"the operator, plugin", asOperator, deployment("plugin-x", "plugin-x", plugin), 0},
		{"the core's ServiceAccount", asMallory, deployment("core", "openfief-core", nil), 5},
		{"the operator's ServiceAccount", asMallory, deployment("operator", "openfief-operator", nil), 5},
		{"the egress proxy's ServiceAccount", asMallory, deployment("proxy", "openfief-egress-proxy", nil), 5},
		{"the operator, core", asOperator, deployment("operator-core", "openfief-core", nil), 5},
		{"the platform installer, core", asInstaller, deployment("installer-core", "openfief-core", nil), 0},
		{"cluster-admin, core", asAdmin, deployment("admin-core", "openfief-core", nil), 0},
		{"an ordinary Deployment", asMallory, deployment("ordinary", "default", nil), 0},
	}
	for _, tt := range creates {
		t.Run("create/"+tt.name, func(t *testing.T) {
			expectRule(t, tt.as, env.as(t, tt.as).Create(context.Background(), tt.deployment, client.DryRunAll), tt.rule)
		})
	}

	owned := deployment("plugin-owned", "plugin-owned", map[string]string{pluginLabel: "owned"})
	env.createReal(t, asOperator, owned)
	mine := deployment("mallory-app", "default", nil)
	env.createReal(t, asMallory, mine)
	core := deployment("openfief-core", "openfief-core", nil)
	env.createReal(t, asAdmin, core)
	podSpecOf := func(d *appsv1.Deployment) *corev1.PodSpec { return &d.Spec.Template.Spec }
	updates := []struct {
		name       string
		as         string
		deployment *appsv1.Deployment
		mutate     func(*appsv1.Deployment)
		rule       int
	}{
		{"an extra container", asMallory, owned, func(d *appsv1.Deployment) {
			podSpecOf(d).Containers = append(podSpecOf(d).Containers, container("sidecar"))
		}, 4},
		{"an extra env variable", asMallory, owned, func(d *appsv1.Deployment) {
			podSpecOf(d).Containers[0].Env = append(podSpecOf(d).Containers[0].Env, corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://evil:3128"})
		}, 4},
		{"an extra volume", asMallory, owned, func(d *appsv1.Deployment) {
			podSpecOf(d).Volumes = append(podSpecOf(d).Volumes, corev1.Volume{Name: "extra", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}, 4},
		{"the image", asMallory, owned, func(d *appsv1.Deployment) { podSpecOf(d).Containers[0].Image = otherImage }, 4},
		{"a pod template annotation", asMallory, owned, func(d *appsv1.Deployment) {
			d.Spec.Template.Annotations = map[string]string{"openfief.io/verified-version": "{}"}
		}, 4},
		{"the ServiceAccount, away from the plugin's", asMallory, owned, func(d *appsv1.Deployment) { podSpecOf(d).ServiceAccountName = "default" }, 4},
		{"paused", asMallory, owned, func(d *appsv1.Deployment) { d.Spec.Paused = true }, 4},
		{"the ServiceAccount of another Deployment, to a plugin's", asMallory, mine, func(d *appsv1.Deployment) {
			podSpecOf(d).ServiceAccountName = "plugin-owned"
		}, 4},
		{"cluster-admin, the image", asAdmin, owned, func(d *appsv1.Deployment) { podSpecOf(d).Containers[0].Image = otherImage }, 4},
		{"a label on the Deployment", asMallory, owned, func(d *appsv1.Deployment) { d.Labels = map[string]string{"team": "ops"} }, 0},
		{"a finalizer and owner reference, by the garbage collector", asGC, owned, func(d *appsv1.Deployment) {
			d.Finalizers = []string{"foregroundDeletion"}
			d.OwnerReferences = nil
		}, 0},
		{"the operator, the image", asOperator, owned, func(d *appsv1.Deployment) { podSpecOf(d).Containers[0].Image = otherImage }, 0},
		{"the core's image", asMallory, core, func(d *appsv1.Deployment) { podSpecOf(d).Containers[0].Image = otherImage }, 5},
		{"the core's image, by the platform installer", asInstaller, core, func(d *appsv1.Deployment) {
			podSpecOf(d).Containers[0].Image = otherImage
		}, 0},
	}
	for _, tt := range updates {
		t.Run("update/"+tt.name, func(t *testing.T) {
			expectRule(t, tt.as, tryUpdate(t, env.as(t, tt.as), tt.deployment, "", tt.mutate), tt.rule)
		})
	}

	// Another field manager's server-side apply that adds a container: the
	// operator's applies would keep it (fields of other managers survive),
	// so it must not get in at all.
	t.Run("apply/an extra container by another field manager", func(t *testing.T) {
		sidecar := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": owned.Name, "namespace": ns},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"containers": []any{map[string]any{"name": "sidecar", "image": otherImage}},
			}}},
		}}
		err := env.as(t, asMallory).Apply(context.Background(), client.ApplyConfigurationFromUnstructured(sidecar), client.FieldOwner("mallory"))
		expectRule(t, asMallory, err, 4)
	})
}

func TestAdmissionPolicyOtherWorkloads(t *testing.T) {
	env := admissionCluster(t)
	tests := []struct {
		name string
		as   string
		objs []client.Object
		rule int
	}{
		{"a plugin's ServiceAccount", asMallory, otherWorkloads("mallory-plugin", "plugin-x"), 2},
		{"the operator, a plugin's ServiceAccount", asOperator, otherWorkloads("operator-plugin", "plugin-x"), 2},
		{"cluster-admin, the core's ServiceAccount", asAdmin, otherWorkloads("admin-core", "openfief-core"), 2},
		{"a plugin's name", asMallory, otherWorkloads("plugin-z", "default"), 2},
		{"an ordinary workload", asMallory, otherWorkloads("ordinary", "default"), 0},
	}
	for _, tt := range tests {
		for _, obj := range tt.objs {
			kind := strings.TrimPrefix(fmt.Sprintf("%T", obj), "*")
			t.Run(tt.name+"/"+kind, func(t *testing.T) {
				expectRule(t, tt.as, env.as(t, tt.as).Create(context.Background(), obj, client.DryRunAll), tt.rule)
			})
		}
	}

	replicaSets := []struct {
		name string
		as   string
		rs   *appsv1.ReplicaSet
		rule int
	}{
		{"a plugin's ServiceAccount", asMallory, replicaSet("mallory-rs", "plugin-x"), 3},
		{"the operator", asOperator, replicaSet("operator-rs", "plugin-x"), 3},
		{"cluster-admin, core", asAdmin, replicaSet("admin-rs", "openfief-core"), 3},
		{"the Deployment controller", asDeployController, replicaSet("plugin-x-5d8f7", "plugin-x"), 0},
		{"the controller manager without ServiceAccount credentials", asKCM, replicaSet("plugin-x-6e9a8", "plugin-x"), 0},
		{"an ordinary ReplicaSet", asMallory, replicaSet("ordinary-rs", "default"), 0},
	}
	for _, tt := range replicaSets {
		t.Run("ReplicaSet/"+tt.name, func(t *testing.T) {
			expectRule(t, tt.as, env.as(t, tt.as).Create(context.Background(), tt.rs, client.DryRunAll), tt.rule)
		})
	}
}
