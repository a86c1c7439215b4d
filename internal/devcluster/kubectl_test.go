//go:build cluster

package devcluster_test

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// TestKubectlAppliesKustomization runs the kubectl `make controlplane`
// builds: `kubectl apply --server-side -k` of a kustomization lands its
// objects, renamed and labelled by kustomize, owned by kubectl's field
// manager through an Apply; the client is the control plane's release.
func TestKubectlAppliesKustomization(t *testing.T) {
	c := devcluster.Shared(t, devcluster.Options{Mode: devcluster.Minimal})
	ctx := t.Context()

	cmd, err := c.Kubectl(ctx, "version", "--client", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl version: %v\n%s", err, out)
	}
	var version struct {
		ClientVersion struct {
			GitVersion string `json:"gitVersion"`
		} `json:"clientVersion"`
	}
	if err := json.Unmarshal(out, &version); err != nil {
		t.Fatalf("kubectl version: %v\n%s", err, out)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	server, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if version.ClientVersion.GitVersion != server.GitVersion {
		t.Errorf("kubectl %s; want the control plane's release %s", version.ClientVersion.GitVersion, server.GitVersion)
	}

	start := time.Now()
	cmd, err = c.Kubectl(ctx, "apply", "--server-side", "-k", "testdata/kustomize")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply --server-side -k: %v\n%s", err, out)
	} else {
		t.Logf("kubectl apply --server-side -k in %v:\n%s", time.Since(start).Round(time.Millisecond), out)
	}

	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps("kubectl-test").Get(ctx, "kz-settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Labels["app.kubernetes.io/part-of"]; got != "kubectl-test" {
		t.Errorf("label part-of %q; want kubectl-test (from the kustomization)", got)
	}
	if cm.Data["greeting"] != "hello" {
		t.Errorf("data %v; want greeting=hello", cm.Data)
	}
	applied := false
	for _, mf := range cm.ManagedFields {
		if mf.Manager == "kubectl" && mf.Operation == metav1.ManagedFieldsOperationApply {
			applied = true
		}
	}
	if !applied {
		t.Errorf("managed fields %+v; want kubectl's Apply (server-side)", cm.ManagedFields)
	}
}
