package deploy_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/arkadiuss/openfief/deploy"
)

// TestCoreOwnerIdentityRenders: deploy/core holds the owner's ServiceAccount,
// which mounts no token and nothing runs as, and the Role an admin binds to
// the owner (OF-18): a token of that ServiceAccount alone, and the service
// proxy to the core's owner port alone; nothing in deploy/core binds it.
func TestCoreOwnerIdentityRenders(t *testing.T) {
	objs, err := deploy.Render("core")
	if err != nil {
		t.Fatal(err)
	}
	var sa corev1.ServiceAccount
	var role rbacv1.Role
	for _, u := range objs {
		switch {
		case u.GetKind() == "ServiceAccount" && u.GetName() == "openfief-owner":
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &sa); err != nil {
				t.Fatal(err)
			}
		case u.GetKind() == "Role" && u.GetName() == "openfief-owner":
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
				t.Fatal(err)
			}
		case u.GetKind() == "RoleBinding" || u.GetKind() == "ClusterRoleBinding":
			var b rbacv1.RoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
				t.Fatal(err)
			}
			if b.RoleRef.Name == "openfief-owner" {
				t.Errorf("%s %s binds the owner's Role; an admin binds it to the owner", u.GetKind(), u.GetName())
			}
			for _, s := range b.Subjects {
				if s.Name == "openfief-owner" {
					t.Errorf("%s %s grants the owner's ServiceAccount a role; it needs none", u.GetKind(), u.GetName())
				}
			}
		}
	}
	if sa.Namespace != "openfief" || sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("ServiceAccount openfief-owner: namespace %q, automount %v; want openfief, false", sa.Namespace, sa.AutomountServiceAccountToken)
	}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{"openfief-owner"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"services/proxy"}, ResourceNames: []string{"openfief-core:owner"}, Verbs: []string{"get", "create"}},
	}
	if role.Namespace != "openfief" {
		t.Errorf("Role openfief-owner in namespace %q", role.Namespace)
	}
	if diff := cmp.Diff(want, role.Rules); diff != "" {
		t.Errorf("Role openfief-owner rules (-want +got):\n%s", diff)
	}
}
