//go:build cluster

package core

import (
	"path/filepath"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// coreUser is the core's ServiceAccount username.
const coreUser = plugins.DefaultCoreSubject

// identityKinds are what applyCoreRBAC applies of deploy/core.
var identityKinds = map[string]bool{"ServiceAccount": true, "Role": true, "RoleBinding": true, "ClusterRole": true, "ClusterRoleBinding": true}

// applyCoreRBAC server-side applies deploy/core's ServiceAccount, roles and
// bindings, rendered as `kubectl apply -k` renders them, and returns a
// config that acts as the core's ServiceAccount (impersonation) once the
// authorizer grants its first rule.
func applyCoreRBAC(t *testing.T, cs kubernetes.Interface, cfg *rest.Config) *rest.Config {
	t.Helper()
	objs, err := deploy.Render(filepath.Join("..", "..", "deploy", "core"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if !identityKinds[u.GetKind()] {
			continue
		}
		if err := cl.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("core-test"), client.ForceOwnership); err != nil {
			t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	testutil.Eventually(t, 30*time.Second, "the authorizer to grant deploy/core's rules", func() (bool, string) {
		ok, reason := allowed(t, cs, authorizationv1.ResourceAttributes{Namespace: plugins.Namespace, Verb: "create", Resource: "tokenreviews", Group: "authentication.k8s.io"})
		ok2, _ := allowed(t, cs, authorizationv1.ResourceAttributes{Namespace: plugins.Namespace, Verb: "list", Resource: "plugins", Group: "openfief.io"})
		return ok && ok2, reason
	})
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: coreUser}
	return as
}

// allowed asks the authorizer whether the core's ServiceAccount may do attrs.
func allowed(t *testing.T, cs kubernetes.Interface, attrs authorizationv1.ResourceAttributes) (bool, string) {
	t.Helper()
	sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: coreUser, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + plugins.Namespace, "system:authenticated"},
			ResourceAttributes: &attrs,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed, sar.Status.Reason
}

// TestCoreRBACIsLeastPrivilege: deploy/core lets the core do what it does
// and nothing near it: it may mint tokens only of its own ServiceAccount
// (never a plugin's), read Plugins but not change them, read neither
// grants nor Secrets, and review tokens but not access.
func TestCoreRBACIsLeastPrivilege(t *testing.T) {
	cs, cfg := cluster(t)
	applyCoreRBAC(t, cs, cfg)
	ns := plugins.Namespace
	for what, tc := range map[string]struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		"list plugins":                 {authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Group: "openfief.io", Resource: "plugins"}, true},
		"watch plugins":                {authorizationv1.ResourceAttributes{Namespace: ns, Verb: "watch", Group: "openfief.io", Resource: "plugins"}, true},
		"get a plugin":                 {authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Group: "openfief.io", Resource: "plugins", Name: "fx"}, true},
		"its own token":                {authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "serviceaccounts", Subresource: "token", Name: DefaultServiceAccount}, true},
		"token reviews":                {authorizationv1.ResourceAttributes{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"}, true},
		"a plugin's token":             {authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "serviceaccounts", Subresource: "token", Name: plugins.ServiceAccountName("fx")}, false},
		"the operator's token":         {authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "serviceaccounts", Subresource: "token", Name: "openfief-operator"}, false},
		"update a plugin":              {authorizationv1.ResourceAttributes{Namespace: ns, Verb: "update", Group: "openfief.io", Resource: "plugins", Name: "fx"}, false},
		"patch a plugin's status":      {authorizationv1.ResourceAttributes{Namespace: ns, Verb: "patch", Group: "openfief.io", Resource: "plugins", Subresource: "status", Name: "fx"}, false},
		"read grants":                  {authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Group: "openfief.io", Resource: "plugingrants"}, false},
		"read Secrets":                 {authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "secrets"}, false},
		"read ConfigMaps":              {authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "configmaps", Name: plugins.TokenKeysConfigMap}, false},
		"plugins of another namespace": {authorizationv1.ResourceAttributes{Namespace: "default", Verb: "list", Group: "openfief.io", Resource: "plugins"}, false},
		"subject access reviews":       {authorizationv1.ResourceAttributes{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, false},
		"ServiceAccounts":              {authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "serviceaccounts", Name: DefaultServiceAccount}, false},
		"pods":                         {authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "pods"}, false},
	} {
		if got, reason := allowed(t, cs, tc.attrs); got != tc.want {
			t.Errorf("%s: allowed %v (%s), want %v", what, got, reason, tc.want)
		}
	}
}
