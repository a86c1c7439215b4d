package node

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kubeRouterUser is the identity kube-router's firewall runs as: a client
// certificate for this user, bound to kubeRouterRole.
const kubeRouterUser = "openfief:kube-router"

// kubeRouterRole is the ClusterRole of kube-router's firewall: it reads
// what its informers watch (kube-router v2.1.0 starts them for pods,
// namespaces, nodes, Services, Endpoints, EndpointSlices and
// NetworkPolicies even with only the firewall on) and records events.
const kubeRouterRole = "openfief:kube-router"

// grantKubeRouter creates kubeRouterRole and binds it to kubeRouterUser.
func grantKubeRouter(ctx context.Context, cs kubernetes.Interface) error {
	read := []string{"get", "list", "watch"}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: kubeRouterRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods", "namespaces", "nodes", "services", "endpoints"}, Verbs: read},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: read},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: kubeRouterRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: kubeRouterRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kubeRouterUser}},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("devcluster: kube-router's ClusterRole: %w", err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("devcluster: kube-router's ClusterRoleBinding: %w", err)
	}
	return nil
}

// writeKubeconfigs grants kube-router's identity its role and writes the
// kubeconfigs of the kubelet (system:node:<Name> in system:nodes, which the
// Node authorizer and NodeRestriction know), kube-proxy (system:kube-proxy)
// and kube-router (kubeRouterUser), each with a client certificate of its
// own.
func (n *Node) writeKubeconfigs(ctx context.Context) error {
	l := n.layout
	kubeconfigs := map[string][]byte{}
	for _, id := range []struct {
		what, path, user string
		groups           []string
	}{
		{"kubelet", l.kubeletKubeconfig, "system:node:" + Name, []string{"system:nodes"}},
		{"kube-proxy", l.proxyKubeconfig, "system:kube-proxy", nil},
		{"kube-router", l.routerKubeconfig, kubeRouterUser, nil},
	} {
		data, err := n.cp.KubeConfig(id.user, id.groups...)
		if err != nil {
			return fmt.Errorf("devcluster: %s identity: %w", id.what, err)
		}
		kubeconfigs[id.path] = data
	}
	if err := grantKubeRouter(ctx, n.cp.Clientset); err != nil {
		return err
	}
	return writeFiles(kubeconfigs)
}
