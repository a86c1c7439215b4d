//go:build cluster

package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestDeployRBACSuffices installs the RBAC of deploy/egress-proxy and runs
// both adapters as the proxy's ServiceAccount: the least privilege it grants
// is enough, and no more than that one ConfigMap is readable.
func TestDeployRBACSuffices(t *testing.T) {
	cs, cfg := cluster(t)
	ctx := t.Context()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "egress-proxy", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("decoding rbac.yaml: %v", err)
		}
		switch o := obj.(type) {
		case *rbacv1.Role:
			_, err = cs.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = cs.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("unexpected %T in rbac.yaml", obj)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}

	asProxy := rest.CopyConfig(cfg)
	asProxy.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:openfief:openfief-egress-proxy",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:openfief", "system:authenticated"},
	}
	pcs, err := kubernetes.NewForConfig(asProxy)
	if err != nil {
		t.Fatal(err)
	}

	r, _ := NewTokenReviewer(pcs.AuthenticationV1(), plugins.AudienceEgress)
	token := requestToken(t, cs, plugins.Namespace, plugins.ServiceAccountName("rbac"), plugins.AudienceEgress)
	if u, err := r.Review(ctx, token); err != nil || u != plugins.ServiceAccountUsername("rbac") {
		t.Fatalf("TokenReview as the proxy: %q, %v", u, err)
	}

	if _, err := cs.CoreV1().ConfigMaps(plugins.Namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: plugins.AllowListConfigMap},
		Data:       map[string]string{"rbac": "api.bank.example:443\n"},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	a := WatchAllowLists(ctx, pcs, plugins.Namespace, plugins.AllowListConfigMap, nil)
	deadline := time.Now().Add(20 * time.Second)
	for ready, why := a.Ready(); !ready; ready, why = a.Ready() {
		if time.Now().After(deadline) {
			t.Fatalf("watching as the proxy: not ready: %s", why)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !a.AllowLists().Allows("rbac", "api.bank.example:443") {
		t.Fatalf("lists %v", a.AllowLists())
	}

	if _, err := pcs.CoreV1().ConfigMaps(plugins.Namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing every ConfigMap as the proxy: %v, want forbidden", err)
	}
	if _, err := pcs.CoreV1().Secrets(plugins.Namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing Secrets as the proxy: %v, want forbidden", err)
	}
}
