//go:build cluster

package kube

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// The egress proxy under its own RBAC: deploy/egress-proxy
// rendered with the kustomize API, as `kubectl apply -k` renders it, its
// ServiceAccount, Role, ClusterRole and bindings applied, and both adapters
// run as the ServiceAccount through impersonation. Every request the API
// server refuses is recorded, so a missing rule fails
// TestRenderedRBACRunsTheProxy naming the request; TestProxyRBACWithoutARule
// shows, rule by rule, that the refusals are seen.

// proxyRBAC is the RBAC deploy/egress-proxy renders.
type proxyRBAC struct {
	account         *corev1.ServiceAccount
	roles           []*rbacv1.Role
	bindings        []*rbacv1.RoleBinding
	clusterRoles    []*rbacv1.ClusterRole
	clusterBindings []*rbacv1.ClusterRoleBinding
}

// renderedProxyRBAC renders deploy/egress-proxy and returns its RBAC.
func renderedProxyRBAC(t *testing.T) proxyRBAC {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "deploy", "egress-proxy")
	objs, err := deploy.Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	var r proxyRBAC
	for _, res := range objs {
		m := res.Object
		var target any
		switch res.GetKind() {
		case "ServiceAccount":
			r.account = &corev1.ServiceAccount{}
			target = r.account
		case "Role":
			r.roles = append(r.roles, &rbacv1.Role{})
			target = r.roles[len(r.roles)-1]
		case "RoleBinding":
			r.bindings = append(r.bindings, &rbacv1.RoleBinding{})
			target = r.bindings[len(r.bindings)-1]
		case "ClusterRole":
			r.clusterRoles = append(r.clusterRoles, &rbacv1.ClusterRole{})
			target = r.clusterRoles[len(r.clusterRoles)-1]
		case "ClusterRoleBinding":
			r.clusterBindings = append(r.clusterBindings, &rbacv1.ClusterRoleBinding{})
			target = r.clusterBindings[len(r.clusterBindings)-1]
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, target); err != nil {
			t.Fatalf("%s %s: %v", res.GetKind(), res.GetName(), err)
		}
	}
	if r.account == nil || len(r.roles)+len(r.clusterRoles) == 0 {
		t.Fatalf("deploy/egress-proxy renders no ServiceAccount or no role")
	}
	return r
}

// user is the ServiceAccount's username.
func (r proxyRBAC) user() string {
	return "system:serviceaccount:" + r.account.Namespace + ":" + r.account.Name
}

// rules lists every rule of every role, in order.
func (r proxyRBAC) rules() []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, role := range r.roles {
		out = append(out, role.Rules...)
	}
	for _, role := range r.clusterRoles {
		out = append(out, role.Rules...)
	}
	return out
}

// variant is r for the ServiceAccount name, every role and binding renamed
// after it and bound to it, with the rule at index skip of rules() left out.
func (r proxyRBAC) variant(name string, skip int) proxyRBAC {
	v := proxyRBAC{account: r.account.DeepCopy()}
	v.account.Name = name
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: v.account.Namespace, Name: name}}
	n := 0
	without := func(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
		var out []rbacv1.PolicyRule
		for _, rule := range rules {
			if n != skip {
				out = append(out, rule)
			}
			n++
		}
		return out
	}
	for _, role := range r.roles {
		role = role.DeepCopy()
		role.Name, role.Rules = name+"-"+role.Name, without(role.Rules)
		v.roles = append(v.roles, role)
	}
	for _, role := range r.clusterRoles {
		role = role.DeepCopy()
		role.Name, role.Rules = name+"-"+role.Name, without(role.Rules)
		v.clusterRoles = append(v.clusterRoles, role)
	}
	for _, b := range r.bindings {
		b = b.DeepCopy()
		b.Name, b.RoleRef.Name, b.Subjects = name+"-"+b.Name, name+"-"+b.RoleRef.Name, subjects
		v.bindings = append(v.bindings, b)
	}
	for _, b := range r.clusterBindings {
		b = b.DeepCopy()
		b.Name, b.RoleRef.Name, b.Subjects = name+"-"+b.Name, name+"-"+b.RoleRef.Name, subjects
		v.clusterBindings = append(v.clusterBindings, b)
	}
	return v
}

// objects lists every object by its resource.
func (r proxyRBAC) objects() map[schema.GroupVersionResource][]metav1.Object {
	rbac := rbacv1.SchemeGroupVersion
	out := map[schema.GroupVersionResource][]metav1.Object{
		corev1.SchemeGroupVersion.WithResource("serviceaccounts"): {r.account},
	}
	for _, o := range r.roles {
		out[rbac.WithResource("roles")] = append(out[rbac.WithResource("roles")], o)
	}
	for _, o := range r.bindings {
		out[rbac.WithResource("rolebindings")] = append(out[rbac.WithResource("rolebindings")], o)
	}
	for _, o := range r.clusterRoles {
		out[rbac.WithResource("clusterroles")] = append(out[rbac.WithResource("clusterroles")], o)
	}
	for _, o := range r.clusterBindings {
		out[rbac.WithResource("clusterrolebindings")] = append(out[rbac.WithResource("clusterrolebindings")], o)
	}
	return out
}

// install server-side applies r as the cluster admin and waits until the
// authorizer grants the ServiceAccount the first rule of every bound role
// (RBAC reaches the authorizer through a watch). remove deletes it all
// again when the test ends.
func (r proxyRBAC) install(t *testing.T, cfg *rest.Config, cs kubernetes.Interface, remove bool) {
	t.Helper()
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for gvr, objs := range r.objects() {
		for _, obj := range objs {
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if err != nil {
				t.Fatal(err)
			}
			unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
			var ri dynamic.ResourceInterface = dyn.Resource(gvr)
			if ns := obj.GetNamespace(); ns != "" {
				ri = dyn.Resource(gvr).Namespace(ns)
			}
			_, err = ri.Apply(ctx, obj.GetName(), &unstructured.Unstructured{Object: u}, metav1.ApplyOptions{FieldManager: "kubectl", Force: true})
			if err != nil {
				t.Fatalf("apply %s %s: %v", gvr.Resource, obj.GetName(), err)
			}
			if remove {
				t.Cleanup(func() {
					if err := ri.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
						t.Errorf("delete %s %s: %v", gvr.Resource, obj.GetName(), err)
					}
				})
			}
		}
	}
	type grant struct {
		namespace string
		rule      rbacv1.PolicyRule
	}
	var grants []grant
	for _, role := range r.roles {
		if len(role.Rules) > 0 {
			grants = append(grants, grant{role.Namespace, role.Rules[0]})
		}
	}
	for _, role := range r.clusterRoles {
		if len(role.Rules) > 0 {
			grants = append(grants, grant{"", role.Rules[0]})
		}
	}
	for _, g := range grants {
		attrs := &authorizationv1.ResourceAttributes{Namespace: g.namespace, Verb: g.rule.Verbs[0], Group: g.rule.APIGroups[0], Resource: g.rule.Resources[0]}
		if len(g.rule.ResourceNames) > 0 {
			attrs.Name = g.rule.ResourceNames[0]
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: r.user(), ResourceAttributes: attrs},
			}, metav1.CreateOptions{})
			if err == nil && sar.Status.Allowed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the authorizer does not grant %s %s %s/%s: %v", r.user(), attrs.Verb, attrs.Group, attrs.Resource, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// refusals records what the API server refuses an identity.
type refusals = testutil.Refusals

// proxyRun is both adapters of the proxy, run as one identity.
type proxyRun struct {
	refused   *refusals
	reviewErr error
	username  string
	lists     *AllowLists
}

// runProxyAs reviews an egress token of plugin-rbac-run and starts
// following the allow-list ConfigMap (which it creates, as the admin, if
// missing), both as user through impersonation, until the test ends.
func runProxyAs(t *testing.T, cs kubernetes.Interface, cfg *rest.Config, user string) *proxyRun {
	t.Helper()
	ctx := t.Context()
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: user}
	run := &proxyRun{refused: &refusals{}}
	as.Wrap(func(rt http.RoundTripper) http.RoundTripper { run.refused.Next = rt; return run.refused })
	pcs, err := kubernetes.NewForConfig(as)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(plugins.Namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: plugins.AllowListConfigMap},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	r, err := NewTokenReviewer(pcs.AuthenticationV1(), plugins.AudienceEgress)
	if err != nil {
		t.Fatal(err)
	}
	token := requestToken(t, cs, plugins.Namespace, plugins.ServiceAccountName("rbac-run"), plugins.AudienceEgress)
	run.username, run.reviewErr = r.Review(ctx, token)
	run.lists = WatchAllowLists(ctx, pcs, plugins.Namespace, plugins.AllowListConfigMap, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return run
}

// TestRenderedRBACRunsTheProxy installs the RBAC deploy/egress-proxy renders
// and runs both adapters as the proxy's ServiceAccount: the review succeeds,
// the allow-lists load, and the API server refuses none of the requests.
func TestRenderedRBACRunsTheProxy(t *testing.T) {
	cs, cfg := cluster(t)
	rbac := renderedProxyRBAC(t)
	if want := "system:serviceaccount:openfief:openfief-egress-proxy"; rbac.user() != want {
		t.Fatalf("deploy/egress-proxy's ServiceAccount is %s, want %s", rbac.user(), want)
	}
	rbac.install(t, cfg, cs, false)
	run := runProxyAs(t, cs, cfg, rbac.user())
	if run.reviewErr != nil || run.username != plugins.ServiceAccountUsername("rbac-run") {
		t.Errorf("TokenReview as the proxy: %q, %v", run.username, run.reviewErr)
	}
	deadline := time.Now().Add(20 * time.Second)
	for ready, why := run.lists.Ready(); !ready; ready, why = run.lists.Ready() {
		if time.Now().After(deadline) {
			t.Fatalf("the allow-lists as the proxy: not ready: %s", why)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := run.refused.List(); len(got) > 0 {
		t.Errorf("the API server refused the proxy as %s, so deploy/egress-proxy/rbac.yaml lacks a rule: %v", rbac.user(), got)
	}
}

// TestProxyRBACWithoutARule runs both adapters as a ServiceAccount bound to
// deploy/egress-proxy's roles less one rule, for each rule, and checks that
// the API server refuses what the rule covers, with the effect the proxy
// then has: no TokenReview (every plugin refused), or no allow-lists (every
// tunnel refused).
func TestProxyRBACWithoutARule(t *testing.T) {
	cs, cfg := cluster(t)
	rbac := renderedProxyRBAC(t)
	for i, rule := range rbac.rules() {
		t.Run(fmt.Sprintf("without %s %s", strings.Join(rule.Resources, ","), strings.Join(rule.Verbs, ",")), func(t *testing.T) {
			less := rbac.variant(fmt.Sprintf("proxy-less-rule-%d", i), i)
			less.install(t, cfg, cs, true)
			run := runProxyAs(t, cs, cfg, less.user())
			deadline := time.Now().Add(20 * time.Second)
			for len(run.refused.Of(rule)) == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("no request for %v was refused; refused: %v", rule.Resources, run.refused.List())
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("refused: %s", run.refused.Of(rule)[0])
			switch {
			case slices.Contains(rule.Resources, "tokenreviews"):
				if !apierrors.IsForbidden(run.reviewErr) {
					t.Errorf("TokenReview: %q, %v; want forbidden", run.username, run.reviewErr)
				}
			case slices.Contains(rule.Resources, "configmaps"):
				if ready, why := run.lists.Ready(); ready {
					t.Error("the allow-lists are ready")
				} else {
					t.Logf("the allow-lists: %s", why)
				}
			}
		})
	}
}
