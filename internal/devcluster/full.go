package devcluster

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/devcluster/proc"
)

const (
	// FakeNodeAnnotation marks the nodes kwok manages; its value is "fake".
	FakeNodeAnnotation = "kwok.x-k8s.io/node"
	// FakeNodeLabel carries the same marker as a label, to select the fake
	// nodes with a nodeSelector.
	FakeNodeLabel = "type"
	// FakeNodeLabelValue is the value of FakeNodeLabel on fake nodes.
	FakeNodeLabelValue = "kwok"

	// fakeNodeLeaseSeconds is the node lease kwok holds for each fake node,
	// as a kubelet does: renewed every quarter of it (10 s), so a fake
	// node's heartbeat does not hang on kwok's status heartbeat alone (every
	// 20 to 25 s, retried with a doubling back-off when the API server is
	// away), which the node lifecycle controller's 50 s grace period left
	// too little room under load.
	fakeNodeLeaseSeconds = 40
)

// kwokReadyAgain is a kwok stage added to the pinned ones: see the file.
//
//go:embed kwok-ready-again.yaml
var kwokReadyAgain []byte

// startFull starts the controller manager, the scheduler and kwok against
// the running API server, registers the fake nodes and waits until they are
// Ready and the controllers run.
func (c *Cluster) startFull(ctx context.Context, binDir string, opts Options) error {
	logs := c.logDir()
	kubeconfig := c.KubeconfigPath
	certDir := c.env.ControlPlane.APIServer.CertDir

	// The controller manager publishes this CA as kube-root-ca.crt; it is
	// the CA that signed the API server's serving certificate.
	caFile := filepath.Join(c.Dir, "ca.crt")
	if err := os.WriteFile(caFile, c.env.ControlPlane.APIServer.SecureServing.CA, 0o600); err != nil {
		return fmt.Errorf("devcluster: %w", err)
	}
	readyAgain := filepath.Join(c.Dir, "kwok-ready-again.yaml")
	if err := os.WriteFile(readyAgain, kwokReadyAgain, 0o600); err != nil {
		return fmt.Errorf("devcluster: %w", err)
	}

	components := []struct {
		name string
		args []string
	}{
		{controllerManagerBin, []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--leader-elect=false",
			"--secure-port=0",
			"--controllers=*",
			// The key envtest has the API server sign and verify
			// ServiceAccount tokens with.
			"--service-account-private-key-file=" + filepath.Join(certDir, "sa-signer.key"),
			"--root-ca-file=" + caFile,
		}},
		{schedulerBin, []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--leader-elect=false",
			"--secure-port=0",
		}},
	}
	if c.node != nil {
		components[0].args = append(components[0].args, c.node.ControllerManagerArgs()...)
	} else {
		components[0].args = append(components[0].args, "--use-service-account-credentials="+strconv.FormatBool(opts.ControllerIdentities))
	}
	for _, comp := range components {
		p, err := proc.Start(comp.name, filepath.Join(binDir, comp.name), comp.args, nil, logs, opts.Output)
		if err != nil {
			return err
		}
		c.procs = append(c.procs, p)
		if err := c.reaper.watch(p.Pid()); err != nil {
			return fmt.Errorf("devcluster: watchdog: %w", err)
		}
	}

	cs, err := c.Clientset()
	if err != nil {
		return fmt.Errorf("devcluster: %w", err)
	}
	if c.node != nil {
		// The real node's kubelet plays the node: no kwok.
		return c.startNode(ctx, cs)
	}
	names := make([]string, opts.Nodes)
	for i := range names {
		names[i] = fmt.Sprintf("kwok-node-%d", i)
	}
	// kwok keeps no state of its own: a crash costs a restart.
	kwokArgs := []string{
		"--kubeconfig=" + kubeconfig,
		"--config=" + filepath.Join(binDir, kwokStagesFile),
		"--config=" + readyAgain,
		"--node-lease-duration-seconds=" + strconv.Itoa(fakeNodeLeaseSeconds),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + FakeNodeAnnotation + "=fake",
		"--server-address=127.0.0.1:0",
	}
	hooks := proc.Hooks{Watch: c.reaper.watch, BeforeRestart: func() error { return c.releaseFakeNodeLeases(names) }}
	if c.kwok, err = proc.Supervise(kwokBin, filepath.Join(binDir, kwokBin), kwokArgs, nil, logs, opts.Output, hooks); err != nil {
		return err
	}
	for i := range names {
		if _, err := cs.CoreV1().Nodes().Create(ctx, fakeNode(names[i]), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("devcluster: creating node %s: %w", names[i], err)
		}
	}

	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	return c.waitFor(ctx, "the fake nodes to become Ready and the controllers to run", func(ctx context.Context) (bool, error) {
		return fullReady(ctx, cs, names)
	})
}

// releaseFakeNodeLeases deletes the node leases of the named fake nodes,
// which a kwok that died still holds: kwok names its holder identity
// afresh on each start and takes over a lease only once it has expired, so
// a kwok started again would leave the nodes' pods alone for up to
// fakeNodeLeaseSeconds. It then creates the leases anew. A node's heartbeat
// is its status as well as its lease, so the moment without one is no
// outage.
func (c *Cluster) releaseFakeNodeLeases(names []string) error {
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for _, name := range names {
		err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, name, metav1.DeleteOptions{})
		if err := ignoreNotFound(err); err != nil {
			errs = append(errs, fmt.Errorf("deleting the node lease of %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// waitFor polls cond until it holds, failing early if a component exits.
func (c *Cluster) waitFor(ctx context.Context, what string, cond wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := c.exited(); err != nil {
			return false, err
		}
		return cond(ctx)
	})
	if err != nil {
		return fmt.Errorf("devcluster: waiting for %s (logs in %s): %w", what, c.logDir(), err)
	}
	return nil
}

// exited returns an error naming a component the cluster started itself
// (the controller manager, the scheduler, kwok) that has exited, and nil
// while they all run. kwok counts only once its supervisor has given up
// starting it again. The real node checks its own (node.Node's waits).
func (c *Cluster) exited() error {
	for _, p := range c.procs {
		if err := p.Exited(); err != nil {
			return err
		}
	}
	if c.kwok != nil {
		return c.kwok.Exited()
	}
	return nil
}

// fullReady reports whether every named node is Ready and the controller
// manager has done its first work in the default namespace: the
// ServiceAccount controller made the default ServiceAccount and the root CA
// publisher made kube-root-ca.crt.
func fullReady(ctx context.Context, cs kubernetes.Interface, nodes []string) (bool, error) {
	for _, name := range nodes {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, ignoreNotFound(err)
		}
		if !nodeReady(n) {
			return false, nil
		}
	}
	if _, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{}); err != nil {
		return false, ignoreNotFound(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); err != nil {
		return false, ignoreNotFound(err)
	}
	return true, nil
}

// ignoreNotFound returns nil for a NotFound error (the object is yet to
// come) and err otherwise.
func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// nodeReady reports whether n has the condition Ready=True.
func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// fakeNode returns a node for kwok to manage, with room for plenty of pods.
func fakeNode(name string) *corev1.Node {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("32"),
		corev1.ResourceMemory:           resource.MustParse("256Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				FakeNodeAnnotation: "fake",
			},
			Labels: map[string]string{
				FakeNodeLabel:                   FakeNodeLabelValue,
				corev1.LabelHostname:            name,
				corev1.LabelOSStable:            "linux",
				corev1.LabelArchStable:          "amd64",
				"node-role.kubernetes.io/agent": "",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources,
		},
	}
}
