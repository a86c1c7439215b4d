//go:build cluster

package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/testutil"
)

// The two ways around deploy/admission that OF-19 closes: (a) a token of the
// operator's, the core's, the egress proxy's or a plugin's ServiceAccount
// minted by someone else, through a token Secret or a TokenRequest; (b) a
// running plugin pod relabelled or released by its owner, so that no
// NetworkPolicy selects it and revoking the plugin no longer removes it.

const (
	tokensPolicy = "openfief-service-account-tokens"
	// asKubelet is a node's identity; the tests add the group system:nodes
	// where they act as a kubelet.
	asKubelet = "system:node:node-1"
	asCore    = "system:serviceaccount:openfief:openfief-core"
	// otherNS is a namespace outside openfief, where the policies do not act.
	otherNS = "household"
)

// asGroups returns a client acting as user with groups.
func (e *admissionEnv) asGroups(t *testing.T, user string, groups ...string) *kubernetes.Clientset {
	t.Helper()
	cfg := rest.CopyConfig(e.cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// clientset returns a typed client acting as user (asAdmin: the cluster's
// own identity).
func (e *admissionEnv) clientset(t *testing.T, user string) *kubernetes.Clientset {
	t.Helper()
	cfg := rest.CopyConfig(e.cluster.Config)
	if user != asAdmin {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// expectPolicyRule is expectRule for any policy of deploy/admission.
func expectPolicyRule(t *testing.T, user string, err error, policy string, rule int) {
	t.Helper()
	if rule == 0 {
		if err != nil {
			t.Fatalf("refused, want allowed: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("allowed, want refused by %s rule %d", policy, rule)
	}
	msg := err.Error()
	if !apierrors.IsForbidden(err) || !strings.Contains(msg, fmt.Sprintf("%s rule %d ", policy, rule)) {
		t.Fatalf("error = %v, want Forbidden by %s rule %d", err, policy, rule)
	}
	if user != asAdmin && !strings.Contains(msg, user+" may not ") {
		t.Errorf("message %q does not name the requester %s", msg, user)
	}
}

// tokenSecret is a Secret the token controller would fill with a
// non-expiring token of the ServiceAccount named.
func tokenSecret(namespace, name, serviceAccount string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Annotations: map[string]string{corev1.ServiceAccountNameKey: serviceAccount},
		},
		Type: corev1.SecretTypeServiceAccountToken,
	}
}

// waitTokensEnforced waits until the API server enforces
// openfief-service-account-tokens.
func (e *admissionEnv) waitTokensEnforced(t *testing.T) {
	t.Helper()
	mallory := e.as(t, asMallory)
	testutil.Eventually(t, 60*time.Second, "the token policy to be enforced", func() (bool, string) {
		err := mallory.Create(context.Background(), tokenSecret(ns, "probe-token", "openfief-operator"), client.DryRunAll)
		if err == nil {
			return false, "a token Secret was allowed"
		}
		return strings.Contains(err.Error(), tokensPolicy+" rule 1"), err.Error()
	})
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	if err := e.as(t, asAdmin).Get(context.Background(), client.ObjectKey{Name: tokensPolicy}, &vap); err != nil {
		t.Fatal(err)
	}
	if tc := vap.Status.TypeChecking; tc != nil && len(tc.ExpressionWarnings) > 0 {
		t.Fatalf("the token policy's expressions have type-checking warnings: %+v", tc.ExpressionWarnings)
	}
}

// TestAdmissionPolicyTokenSecrets: walk-around (a) through a Secret. No Secret
// in openfief may ask the token controller for a token, whoever asks, for
// whichever ServiceAccount, at creation or later.
func TestAdmissionPolicyTokenSecrets(t *testing.T) {
	env := admissionCluster(t)
	ctx := context.Background()
	annotated := func(name, key, value string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{key: value}},
			Type:       corev1.SecretTypeOpaque,
			StringData: map[string]string{"k": "v"},
		}
	}
	creates := []struct {
		name   string
		as     string
		secret *corev1.Secret
		rule   int
	}{
		{"a token Secret for the operator", asMallory, tokenSecret(ns, "operator-token", "openfief-operator"), 1},
		{"a token Secret for the core", asMallory, tokenSecret(ns, "core-token", "openfief-core"), 1},
		{"a token Secret for the egress proxy", asMallory, tokenSecret(ns, "proxy-token", "openfief-egress-proxy"), 1},
		{"a token Secret for a plugin", asMallory, tokenSecret(ns, "plugin-token", "plugin-x"), 1},
		{"a token Secret for the owner's ServiceAccount", asMallory, tokenSecret(ns, "owner-token", "openfief-owner"), 1},
		{"a token Secret for default", asMallory, tokenSecret(ns, "default-token", "default"), 1},
		{"a token Secret by cluster-admin", asAdmin, tokenSecret(ns, "admin-token", "openfief-operator"), 1},
		{"a token Secret by the operator", asOperator, tokenSecret(ns, "op-token", "openfief-operator"), 1},
		{"an Opaque Secret with the ServiceAccount name annotation", asMallory,
			annotated("named", corev1.ServiceAccountNameKey, "openfief-operator"), 1},
		{"an Opaque Secret with the ServiceAccount uid annotation", asMallory,
			annotated("uid", corev1.ServiceAccountUIDKey, "00000000-0000-0000-0000-000000000000"), 1},
		{"an ordinary Secret", asMallory, annotated("ordinary", "team", "ops"), 0},
	}
	for _, tt := range creates {
		t.Run("create/"+tt.name, func(t *testing.T) {
			expectPolicyRule(t, tt.as, env.as(t, tt.as).Create(ctx, tt.secret, client.DryRunAll), tokensPolicy, tt.rule)
		})
	}

	// Outside openfief the policy does not act, and need not: the token
	// controller fills a Secret with a token of the ServiceAccount of that
	// name in the Secret's own namespace (tokens_controller.go keys its
	// lookup by the Secret's namespace), never of one in openfief.
	admin := env.as(t, asAdmin)
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: otherNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Run("create/a token Secret in another namespace naming the operator", func(t *testing.T) {
		expectPolicyRule(t, asAdmin, admin.Create(ctx, tokenSecret(otherNS, "operator-token-dry-run", "openfief-operator"), client.DryRunAll), tokensPolicy, 0)
	})

	// A Secret created innocent and changed later.
	existing := annotated("later", "team", "ops")
	env.createReal(t, asMallory, existing)
	t.Run("update/the ServiceAccount name annotation added", func(t *testing.T) {
		err := tryUpdate(t, env.as(t, asMallory), existing, "", func(s *corev1.Secret) {
			s.Annotations[corev1.ServiceAccountNameKey] = "openfief-operator"
		})
		expectPolicyRule(t, asMallory, err, tokensPolicy, 1)
	})
	t.Run("patch/the ServiceAccount name annotation added", func(t *testing.T) {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+corev1.ServiceAccountNameKey+`":"openfief-core"}}}`))
		err := env.as(t, asMallory).Patch(ctx, existing.DeepCopy(), patch, client.DryRunAll)
		expectPolicyRule(t, asMallory, err, tokensPolicy, 1)
	})
	t.Run("apply/the ServiceAccount name annotation added", func(t *testing.T) {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": existing.Name, "namespace": ns, "annotations": map[string]any{
				corev1.ServiceAccountNameKey: "openfief-operator",
			}},
		}}
		err := env.as(t, asMallory).Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("mallory"), client.DryRunAll)
		expectPolicyRule(t, asMallory, err, tokensPolicy, 1)
	})
	t.Run("update/another annotation", func(t *testing.T) {
		err := tryUpdate(t, env.as(t, asMallory), existing, "", func(s *corev1.Secret) { s.Annotations["note"] = "x" })
		expectPolicyRule(t, asMallory, err, tokensPolicy, 0)
	})
}

// TestAdmissionPolicyTokenRequests: walk-around (a) through TokenRequest. Only a
// kubelet (and the core for its own account) obtains a token of the
// platform's and plugins' ServiceAccounts; openfief-owner's and other
// accounts' tokens stay RBAC's business.
func TestAdmissionPolicyTokenRequests(t *testing.T) {
	env := admissionCluster(t)
	ctx := context.Background()
	admin := env.clientset(t, asAdmin)
	for _, sa := range []string{"openfief-operator", "openfief-core", "openfief-egress-proxy", "plugin-x", "openfief-owner", "default"} {
		testutil.EnsureServiceAccount(t, admin, ns, sa)
	}
	// A running pod of plugin x, to bind a token to.
	running := pod("plugin-x-tokens", "plugin-x", map[string]string{pluginLabel: "x"})
	env.createReal(t, asRSController, running)
	if err := env.as(t, asAdmin).Get(ctx, client.ObjectKeyFromObject(running), running); err != nil {
		t.Fatal(err)
	}

	request := func(cs *kubernetes.Clientset, sa string, bound *authenticationv1.BoundObjectReference) error {
		_, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"test"}, ExpirationSeconds: ptr.To[int64](600), BoundObjectRef: bound},
		}, metav1.CreateOptions{})
		return err
	}
	podRef := &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: running.Name, UID: running.UID}
	kubelet := env.asGroups(t, asKubelet, "system:nodes", "system:authenticated")
	nodesGroup := env.asGroups(t, asMallory, "system:nodes", "system:authenticated")
	tests := []struct {
		name  string
		as    string
		cs    *kubernetes.Clientset
		sa    string
		bound *authenticationv1.BoundObjectReference
		rule  int
	}{
		{"the operator's, by a user", asMallory, nil, "openfief-operator", nil, 2},
		{"the core's, by a user", asMallory, nil, "openfief-core", nil, 2},
		{"the egress proxy's, by a user", asMallory, nil, "openfief-egress-proxy", nil, 2},
		{"a plugin's, by a user", asMallory, nil, "plugin-x", nil, 2},
		{"a plugin's bound to its running pod, by a user", asMallory, nil, "plugin-x", podRef, 2},
		{"the operator's, by cluster-admin", asAdmin, nil, "openfief-operator", nil, 2},
		{"a plugin's, by the operator", asOperator, nil, "plugin-x", nil, 2},
		{"the operator's, by the operator", asOperator, nil, "openfief-operator", nil, 2},
		{"a plugin's, by the core", asCore, nil, "plugin-x", nil, 2},
		{"the operator's, by the core", asCore, nil, "openfief-operator", nil, 2},
		// Impersonating system:node:* always brings the group system:nodes
		// (constrained impersonation), so the other half: the group
		// without a node's name.
		{"a plugin's, by a user in the nodes' group without a node's name", asMallory, nodesGroup, "plugin-x", nil, 2},
		{"the core's, by the core", asCore, nil, "openfief-core", nil, 0},
		{"a plugin's bound to its pod, by a kubelet", asKubelet, kubelet, "plugin-x", podRef, 0},
		{"the operator's, by a kubelet", asKubelet, kubelet, "openfief-operator", nil, 0},
		{"the owner's, by a user RBAC lets", asMallory, nil, "openfief-owner", nil, 0},
		{"default, by a user RBAC lets", asMallory, nil, "default", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := tt.cs
			if cs == nil {
				cs = env.clientset(t, tt.as)
			}
			err := request(cs, tt.sa, tt.bound)
			expectPolicyRule(t, tt.as, err, tokensPolicy, tt.rule)
		})
	}
}

// TestAdmissionPolicyPodLabelsAndOwners: walk-around (b). No one changes a
// running pod's labels in openfief (through the pod or pods/status, by
// update, patch or server-side apply) or, but for the ReplicaSet controller
// and the garbage collector, its owner references; pods and Deployments
// labelled as the platform's are the controllers' and the operator's.
func TestAdmissionPolicyPodLabelsAndOwners(t *testing.T) {
	env := admissionCluster(t)
	ctx := context.Background()
	// The labels the operator gives a plugin's pods (operator.PodLabels).
	pluginLabels := map[string]string{
		"app.kubernetes.io/name":       "openfief-plugin",
		"app.kubernetes.io/component":  "plugin",
		"app.kubernetes.io/managed-by": "openfief-operator",
		pluginLabel:                    "walk",
	}
	rs := replicaSet("plugin-walk-5d8f7", "plugin-walk")
	rs.Spec.Selector = &metav1.LabelSelector{MatchLabels: pluginLabels}
	rs.Spec.Template.Labels = pluginLabels
	env.createReal(t, asDeployController, rs)
	if err := env.as(t, asAdmin).Get(ctx, client.ObjectKeyFromObject(rs), rs); err != nil {
		t.Fatal(err)
	}
	running := pod("plugin-walk-5d8f7-abcde", "plugin-walk", nil)
	running.Labels = pluginLabels
	running.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	running.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	env.createReal(t, asRSController, running)
	core := pod("openfief-core-7c9d-xyz", "openfief-core", map[string]string{"app.kubernetes.io/name": "openfief-core"})
	env.createReal(t, asRSController, core)
	ordinary := pod("mallory-walk", "default", nil)
	env.createReal(t, asMallory, ordinary)

	removeName := func(p *corev1.Pod) { delete(p.Labels, "app.kubernetes.io/name") }
	updates := []struct {
		name   string
		as     string
		pod    *corev1.Pod
		sub    string
		mutate func(*corev1.Pod)
		rule   int
	}{
		{"app.kubernetes.io/name removed from a plugin pod", asMallory, running, "", removeName, 6},
		// Rule 1 answers first: the openfief.io/plugin label goes too.
		{"every label removed from a plugin pod", asMallory, running, "", func(p *corev1.Pod) { p.Labels = nil }, 1},
		{"app.kubernetes.io/name removed through pods/status", asMallory, running, "status", removeName, 6},
		{"managed-by changed through pods/status", asMallory, running, "status", func(p *corev1.Pod) {
			p.Labels["app.kubernetes.io/managed-by"] = "mallory"
		}, 6},
		{"a label added to a plugin pod", asMallory, running, "", func(p *corev1.Pod) { p.Labels["team"] = "ops" }, 6},
		{"app.kubernetes.io/name removed by cluster-admin", asAdmin, running, "", removeName, 6},
		{"app.kubernetes.io/name removed by the operator", asOperator, running, "", removeName, 6},
		{"app.kubernetes.io/name removed by the ReplicaSet controller", asRSController, running, "", removeName, 6},
		{"app.kubernetes.io/name removed by the garbage collector", asGC, running, "", removeName, 6},
		{"the controller owner reference removed", asMallory, running, "", func(p *corev1.Pod) { p.OwnerReferences = nil }, 6},
		{"the owner reference made no controller", asMallory, running, "", func(p *corev1.Pod) {
			p.OwnerReferences[0].Controller = ptr.To(false)
		}, 6},
		{"the owner reference removed by cluster-admin", asAdmin, running, "", func(p *corev1.Pod) { p.OwnerReferences = nil }, 6},
		{"the core's name label removed", asMallory, core, "", removeName, 6},
		{"an ordinary pod labelled as the core", asMallory, ordinary, "", func(p *corev1.Pod) {
			p.Labels["app.kubernetes.io/name"] = "openfief-core"
		}, 6},
		{"an ordinary pod labelled as a plugin", asMallory, ordinary, "", func(p *corev1.Pod) {
			p.Labels["app.kubernetes.io/name"] = "openfief-plugin"
			p.Labels["app.kubernetes.io/managed-by"] = "openfief-operator"
		}, 6},
		{"an ephemeral container in the core's pod", asMallory, core, "ephemeralcontainers", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{
					Name: "debug", Image: otherImage, SecurityContext: container("debug").SecurityContext,
				},
			})
		}, 1},
		{"a plugin pod resized in place", asMallory, running, "resize", func(p *corev1.Pod) {
			r := &p.Spec.Containers[0].Resources
			r.Requests[corev1.ResourceCPU], r.Limits[corev1.ResourceCPU] = resource.MustParse("200m"), resource.MustParse("200m")
		}, 1},
		// What the controllers and kubelets do stays allowed.
		{"the owner reference released by the ReplicaSet controller", asRSController, running, "", func(p *corev1.Pod) { p.OwnerReferences = nil }, 0},
		{"a dangling owner reference removed by the garbage collector", asGC, running, "", func(p *corev1.Pod) { p.OwnerReferences = nil }, 0},
		{"a plugin pod's status by its kubelet", asKubelet, running, "status", func(p *corev1.Pod) {
			p.Status.Message = "running"
		}, 0},
		{"an annotation on a plugin pod", asMallory, running, "", func(p *corev1.Pod) {
			p.Annotations = map[string]string{"note": "x"}
		}, 0},
	}
	for _, tt := range updates {
		t.Run("update/"+tt.name, func(t *testing.T) {
			expectRule(t, tt.as, tryUpdate(t, env.as(t, tt.as), tt.pod, tt.sub, tt.mutate), tt.rule)
		})
	}

	t.Run("patch/app.kubernetes.io/name removed by a merge patch", func(t *testing.T) {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app.kubernetes.io/name":null}}}`))
		expectRule(t, asMallory, env.as(t, asMallory).Patch(ctx, running.DeepCopy(), patch, client.DryRunAll), 6)
	})
	t.Run("patch/the owner references removed by a JSON patch", func(t *testing.T) {
		patch := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/ownerReferences"}]`))
		expectRule(t, asMallory, env.as(t, asMallory).Patch(ctx, running.DeepCopy(), patch, client.DryRunAll), 6)
	})
	t.Run("patch/app.kubernetes.io/name removed through pods/status", func(t *testing.T) {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app.kubernetes.io/name":null}}}`))
		err := env.as(t, asMallory).Status().Patch(ctx, running.DeepCopy(), patch, &client.SubResourcePatchOptions{
			PatchOptions: client.PatchOptions{DryRun: []string{metav1.DryRunAll}},
		})
		expectRule(t, asMallory, err, 6)
	})
	t.Run("apply/app.kubernetes.io/name taken over by server-side apply", func(t *testing.T) {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": running.Name, "namespace": ns, "labels": map[string]any{
				"app.kubernetes.io/name": "not-a-plugin",
			}},
		}}
		err := env.as(t, asMallory).Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("mallory"), client.ForceOwnership, client.DryRunAll)
		expectRule(t, asMallory, err, 6)
	})
	t.Run("update/the ServiceAccount of an ordinary pod, to a plugin's", func(t *testing.T) {
		// Refused by the API server's validation before the policy is asked:
		// a pod's ServiceAccount is immutable.
		err := tryUpdate(t, env.as(t, asMallory), ordinary, "", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "plugin-walk" })
		if !apierrors.IsInvalid(err) {
			t.Fatalf("error = %v, want Invalid (immutable field)", err)
		}
	})

	// Born with the platform's labels: pods only from the ReplicaSet
	// controller, Deployments only from the operator (plugins) or an
	// installer (the core, the operator, the egress proxy).
	creates := []struct {
		name string
		as   string
		obj  client.Object
		rule int
	}{
		{"a pod labelled as the core", asMallory, pod("fake-core", "default", map[string]string{"app.kubernetes.io/name": "openfief-core"}), 1},
		{"a pod labelled as the egress proxy", asMallory, pod("fake-proxy", "default", map[string]string{"app.kubernetes.io/name": "openfief-egress-proxy"}), 1},
		{"a pod labelled as a plugin", asMallory, pod("fake-plugin", "default", map[string]string{"app.kubernetes.io/name": "openfief-plugin"}), 1},
		{"a pod labelled as the operator's", asMallory, pod("fake-managed", "default", map[string]string{"app.kubernetes.io/managed-by": "openfief-operator"}), 1},
		{"a Deployment whose pods are labelled as the core", asMallory, deployment("fake-core", "default", map[string]string{"app.kubernetes.io/name": "openfief-core"}), 5},
		{"a Deployment whose pods are labelled as a plugin", asMallory, deployment("fake-plugin", "default", map[string]string{"app.kubernetes.io/name": "openfief-plugin"}), 4},
		{"a Deployment labelled as the core, by the platform installer", asInstaller, deployment("installer-fake-core", "default", map[string]string{"app.kubernetes.io/name": "openfief-core"}), 0},
		{"a pod labelled otherwise", asMallory, pod("mallory-other", "default", map[string]string{"app.kubernetes.io/name": "mallory"}), 0},
	}
	for _, tt := range creates {
		t.Run("create/"+tt.name, func(t *testing.T) {
			expectRule(t, tt.as, env.as(t, tt.as).Create(ctx, tt.obj, client.DryRunAll), tt.rule)
		})
	}
}
