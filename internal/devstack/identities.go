package devstack

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// The identities the operator, the egress proxy and the core run as with
// Options.RunAsServiceAccounts: their ServiceAccounts in deploy/operator,
// deploy/egress-proxy and deploy/core.
const (
	OperatorUser = "system:serviceaccount:" + plugins.Namespace + ":openfief-operator"
	ProxyUser    = "system:serviceaccount:" + plugins.Namespace + ":openfief-egress-proxy"
	CoreUser     = CoreSubject
)

// identityKinds are what installIdentities applies of deploy/operator and
// deploy/egress-proxy: their identities and rights, not their workloads,
// which run in this process.
var identityKinds = map[string]bool{
	"ServiceAccount": true, "Role": true, "RoleBinding": true, "ClusterRole": true, "ClusterRoleBinding": true,
}

// clientConfig is the configuration the operator or the proxy reaches the
// API server with: the admin's, as user when opts.RunAsServiceAccounts,
// wrapped by opts.WrapTransport.
func (s *Stack) clientConfig(opts Options, user string) *rest.Config {
	cfg := rest.CopyConfig(s.Cluster.Config)
	if opts.RunAsServiceAccounts {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	}
	if opts.WrapTransport != nil {
		cfg.Wrap(opts.WrapTransport)
	}
	return cfg
}

// installIdentities renders deploy/operator and deploy/egress-proxy of the
// source tree with the kustomize API, as `kubectl apply -k` would, server-side
// applies their ServiceAccounts, roles and bindings as the admin, and waits
// until the authorizer grants each bound ServiceAccount its roles (RBAC
// reaches the authorizer through a watch).
func (s *Stack) installIdentities(ctx context.Context) error {
	root, err := sourceRoot()
	if err != nil {
		return err
	}
	cl, err := client.New(s.Cluster.Config, client.Options{})
	if err != nil {
		return err
	}
	rules := map[string][]rbacv1.PolicyRule{} // by kind/name
	type binding struct {
		namespace string
		roleRef   rbacv1.RoleRef
		subjects  []rbacv1.Subject
	}
	var bindings []binding
	for _, dir := range []string{"operator", "egress-proxy", "core"} {
		objs, err := deploy.Render(filepath.Join(root, "deploy", dir))
		if err != nil {
			return err
		}
		for _, u := range objs {
			if !identityKinds[u.GetKind()] {
				continue
			}
			m := u.Object
			if err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("openfief-dev"), client.ForceOwnership); err != nil {
				return fmt.Errorf("apply %s %s of deploy/%s: %w", u.GetKind(), u.GetName(), dir, err)
			}
			switch u.GetKind() {
			case "Role", "ClusterRole":
				var role rbacv1.ClusterRole // a Role's fields are a ClusterRole's
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &role); err != nil {
					return err
				}
				rules[u.GetKind()+"/"+u.GetName()] = role.Rules
			case "RoleBinding", "ClusterRoleBinding":
				var b rbacv1.RoleBinding
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &b); err != nil {
					return err
				}
				bindings = append(bindings, binding{b.Namespace, b.RoleRef, b.Subjects})
			}
		}
	}
	for _, b := range bindings {
		rs := rules[b.roleRef.Kind+"/"+b.roleRef.Name]
		if len(rs) == 0 {
			continue
		}
		attrs := &authorizationv1.ResourceAttributes{
			Namespace: b.namespace, Verb: rs[0].Verbs[0], Group: rs[0].APIGroups[0],
		}
		attrs.Resource, attrs.Subresource, _ = strings.Cut(rs[0].Resources[0], "/")
		if len(rs[0].ResourceNames) > 0 {
			attrs.Name = rs[0].ResourceNames[0]
		}
		for _, sub := range b.subjects {
			if sub.Kind != rbacv1.ServiceAccountKind {
				continue
			}
			user := "system:serviceaccount:" + sub.Namespace + ":" + sub.Name
			if err := waitAuthorized(ctx, cl, user, attrs); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitAuthorized asks the authorizer, for up to 30 s, whether user may do
// what attrs describe, until it may.
func waitAuthorized(ctx context.Context, cl client.Client, user string, attrs *authorizationv1.ResourceAttributes) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: attrs.DeepCopy()}}
		err := cl.Create(ctx, sar)
		if err == nil && sar.Status.Allowed {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the authorizer does not let %s %s %s in group %q: %v %s", user, attrs.Verb, attrs.Resource, attrs.Group, err, sar.Status.Reason)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
