//go:build cluster

package core

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	openfief "github.com/arkadiuss/openfief/sdk/go"
)

// The tests that call plugins or watch Plugins run against a real etcd and
// kube-apiserver (devcluster's minimal mode, with the CRDs). Without the
// binaries from `make controlplane` they fail, saying so; they never skip.
// The scheduler's tests need no control plane and start none. The scale
// benchmark's stand-in runs first when asked (scale_standin_test.go).
func TestMain(m *testing.M) {
	serveStandInIfAsked()
	os.Exit(devcluster.Main(m))
}

// cluster returns an admin clientset and config with the openfief namespace
// and the core's ServiceAccount in place.
func cluster(t testing.TB) (*kubernetes.Clientset, *rest.Config) {
	t.Helper()
	c := devcluster.Shared(t, devcluster.Options{CRDDirectoryPaths: []string{testutil.CRDDir()}})
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	testutil.EnsureNamespaces(t, cs, plugins.Namespace)
	for _, sa := range []string{DefaultServiceAccount} {
		_, err = cs.CoreV1().ServiceAccounts(plugins.Namespace).Create(ctx, &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Name: sa}, AutomountServiceAccountToken: ptr.To(false),
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return cs, c.Config
}

// jwksDir writes what the operator publishes in openfief-sa-jwks (D-59):
// the API server's issuer and public keys, read from its discovery
// endpoints, as the files the SDK's verifier reads.
func jwksDir(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/.well-known/openid-configuration").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var disc struct {
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal(raw, &disc); err != nil || disc.Issuer == "" {
		t.Fatalf("discovery %s: %v", raw, err)
	}
	keys, err := cs.CoreV1().RESTClient().Get().AbsPath("/openid/v1/jwks").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, openfief.JWKSFileName), keys, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, openfief.IssuerFileName), []byte(disc.Issuer), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}
