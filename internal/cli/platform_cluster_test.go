//go:build cluster

package cli

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// platformCluster is a control plane for `openfief platform`'s tests: a
// real API server and etcd (internal/devcluster, minimal), with
// kube-controller-manager run as real clusters run it
// (--use-service-account-credentials=true, every controller), so
// deploy/admission's policy admits the controllers' pods, the scheduler,
// and kwok playing one node: pods are scheduled and become Ready, no
// container runs. No CRD is preinstalled: the command installs them.
type platformCluster struct {
	cluster *devcluster.Cluster
	kube    *kube
}

// newPlatformCluster starts a platformCluster for one test; it stops with
// the test.
func newPlatformCluster(t *testing.T) *platformCluster {
	t.Helper()
	ctx := context.Background()
	c, err := devcluster.Start(ctx, devcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	bin, err := devcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	writeFile(t, caFile, string(c.Config.CAData))
	kc := c.KubeconfigPath
	testutil.StartProcess(t, filepath.Join(bin, "kube-controller-manager"),
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--leader-elect=false", "--secure-port=0", "--controllers=*",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+filepath.Join(c.Dir, "apiserver", "sa-signer.key"),
		"--root-ca-file="+caFile)
	testutil.StartProcess(t, filepath.Join(bin, "kube-scheduler"),
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--leader-elect=false", "--secure-port=0")
	testutil.StartProcess(t, filepath.Join(bin, "kwok"),
		"--kubeconfig="+kc, "--config="+filepath.Join(bin, "kwok-stages.yaml"),
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector="+devcluster.FakeNodeAnnotation+"=fake",
		"--server-address=127.0.0.1:0")

	s, err := apiconv.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "kwok-node-0",
			Annotations: map[string]string{devcluster.FakeNodeAnnotation: "fake"},
			Labels:      map[string]string{corev1.LabelHostname: "kwok-node-0", corev1.LabelOSStable: "linux"}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	if err := cl.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 60*time.Second, "the kwok node Ready and the controllers running", func() (bool, string) {
		var n corev1.Node
		if err := cl.Get(ctx, client.ObjectKey{Name: node.Name}, &n); err != nil {
			return false, err.Error()
		}
		ready := false
		for _, cond := range n.Status.Conditions {
			ready = ready || (cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue)
		}
		if !ready {
			return false, "node not Ready"
		}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kube-root-ca.crt"}, &corev1.ConfigMap{}); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	return &platformCluster{cluster: c, kube: &kube{kubeconfig: c.KubeconfigPath, c: cl}}
}
