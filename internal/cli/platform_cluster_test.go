//go:build cluster

package cli

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/devcluster"
)

// platformCluster is a control plane for `openfief platform`'s tests: a
// real API server and etcd, kube-controller-manager run as real clusters
// run it (every controller under its own ServiceAccount), so
// deploy/admission's policy admits the controllers' pods, the scheduler,
// and kwok playing one node: pods are scheduled and become Ready, no
// container runs (internal/devcluster's Full mode, whose kwok is started
// again if it crashes). No CRD is preinstalled: the command installs them.
type platformCluster struct {
	cluster *devcluster.Cluster
	kube    *kube
}

// newPlatformCluster starts a platformCluster for one test; it stops with
// the test.
func newPlatformCluster(t *testing.T) *platformCluster {
	t.Helper()
	c, err := devcluster.Start(context.Background(), devcluster.Options{Mode: devcluster.Full, ControllerIdentities: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	s, err := apiconv.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return &platformCluster{cluster: c, kube: &kube{kubeconfig: c.KubeconfigPath, c: cl}}
}
