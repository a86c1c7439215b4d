//go:build cluster

package incluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/platform"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// testFaults runs two nbp-fx instances and a probe plugin, then kills, one
// after another, the operator's pod, the egress proxy's pods, the core's
// pod, containerd (kill -9) and the kubelet (kill -9), each started again
// (the pods by their Deployments, the node's processes by the test). After
// each fault every platform Deployment is Available again, the plugins'
// pods are the same pods, and the core syncs both instances again; at the
// end each still holds exactly the two rates the NBP stand-in serves
// (nothing stored twice). Throughout, a prober enters the probe plugin's
// network namespace from the node, which works with the kubelet and
// containerd down, and tries the paths a plugin must never have: the NBP
// stand-in directly, the cluster DNS over UDP and TCP, the core's owner
// port; every attempt must be refused.
func testFaults(t *testing.T, e *platformEnv) {
	ctx := context.Background()
	instances := []string{"fault-a", "fault-b"}
	ref := e.preg.publishNBPFx(t, e.root, e.signer, e.nbp.CAPEM())
	for _, name := range instances {
		openfief(t, e.kubeconfig, "plugin", "install", name, "--image", ref.String(), "--signers", e.signersFile, "--insecure-registry", e.preg.bridge)
		openfief(t, e.kubeconfig, "plugin", "approve", name, "--yes")
	}
	probe := e.preg.publish(t, "plugins/probe", nbpFxManifest(t, e.root), map[string][]byte{"plugin": e.probeBinary(t)}, e.signer)
	openfief(t, e.kubeconfig, "plugin", "install", "fault-probe", "--image", probe.String(), "--signers", e.signersFile, "--insecure-registry", e.preg.bridge)
	openfief(t, e.kubeconfig, "plugin", "approve", "fault-probe", "--yes")
	pods := map[string]*corev1.Pod{}
	for _, name := range append(instances, "fault-probe") {
		pods[name] = runningPluginPod(t, e.cs, name)
	}
	for _, name := range instances {
		waitCoreStatus(t, e, name, 2*time.Minute, name+"'s first sync with the stand-in's rates stored", func(s coreStatus) bool {
			return s.succeeded && s.fxRates == 2
		})
	}

	p := startProber(t, e, pods["fault-probe"])
	faults := []struct {
		name string
		do   func(t *testing.T)
	}{
		{"operator pod deleted", func(t *testing.T) { deletePods(t, e, "openfief-operator") }},
		{"egress proxy pods deleted", func(t *testing.T) { deletePods(t, e, "openfief-egress-proxy") }},
		{"core pod deleted", func(t *testing.T) { deletePods(t, e, "openfief-core") }},
		{"containerd killed", func(t *testing.T) {
			must(t, e.c.KillNodeComponent(ctx, devcluster.NodeContainerd, 5*time.Second))
		}},
		{"kubelet killed", func(t *testing.T) {
			must(t, e.c.KillNodeComponent(ctx, devcluster.NodeKubelet, 5*time.Second))
		}},
	}
	for _, f := range faults {
		start := time.Now()
		f.do(t)
		waitPlatformAvailable(t, e)
		for name, pod := range pods {
			if got := runningPluginPod(t, e.cs, name); got.UID != pod.UID {
				t.Errorf("after %s plugin %s runs pod %s, want the same pod %s", f.name, name, got.Name, pod.Name)
			}
		}
		for _, name := range instances {
			syncedAfter(t, e, name, time.Now(), name+" synced again after "+f.name)
		}
		t.Logf("%s: converged and synced again in %s (%d probes so far, none open)", f.name, time.Since(start).Round(100*time.Millisecond), p.count())
	}
	p.stop(t)
	for _, name := range instances {
		s, _ := readCoreStatus(ctx, e, name)
		if s.fxRates != 2 {
			t.Errorf("%s holds %d FX rates after the faults, want the stand-in's 2 (a sync stored twice?): %s", name, s.fxRates, s.summary)
		}
	}
	for _, name := range append(instances, "fault-probe") {
		openfief(t, e.kubeconfig, "plugin", "uninstall", name, "--yes", "--purge", "--wait", "60s")
	}
}

// deletePods deletes the pods of the platform Deployment name.
func deletePods(t *testing.T, e *platformEnv, name string) {
	t.Helper()
	ctx := context.Background()
	d, err := e.cs.AppsV1().Deployments(plugins.Namespace).Get(ctx, name, metav1.GetOptions{})
	must(t, err)
	must(t, e.cs.CoreV1().Pods(plugins.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{
		LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector),
	}))
}

// waitPlatformAvailable waits until every platform Deployment has its
// rollout complete and Available, with no pod of an older generation left.
func waitPlatformAvailable(t *testing.T, e *platformEnv) {
	t.Helper()
	ctx := context.Background()
	for name := range platformDeployments {
		testutil.Eventually(t, 3*time.Minute, name+" Available again", func() (bool, string) {
			d, err := e.cs.AppsV1().Deployments(plugins.Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			pods, err := e.cs.CoreV1().Pods(plugins.Namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
			if err != nil {
				return false, err.Error()
			}
			ready := 0
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && podReady(&p) {
					ready++
				}
			}
			return platform.DeploymentAvailable(d) && ready == int(*d.Spec.Replicas) && len(pods.Items) == ready,
				fmt.Sprintf("%d/%d available, %d pods, %d ready", d.Status.AvailableReplicas, *d.Spec.Replicas, len(pods.Items), ready)
		})
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// prober tries, from a plugin pod's network namespace, every path out that
// a plugin must not have, over and over until stopped.
type prober struct {
	mu     sync.Mutex
	n      int
	open   []string
	cancel context.CancelFunc
	done   chan struct{}
}

// startProber starts probing from pod (a running probe plugin): the NBP
// stand-in directly, the cluster DNS Service over UDP and TCP, and the
// core's owner port at its Service.
func startProber(t *testing.T, e *platformEnv, pod *corev1.Pod) *prober {
	t.Helper()
	netns, err := e.c.PodNetNS(string(pod.UID))
	must(t, err)
	bin := filepath.Join(t.TempDir(), "probe")
	must(t, os.WriteFile(bin, e.probeBinary(t), 0o755))
	core, err := e.cs.CoreV1().Services(plugins.Namespace).Get(context.Background(), "openfief-core", metav1.GetOptions{})
	must(t, err)
	owner := ""
	for _, port := range core.Spec.Ports {
		if port.Name == "owner" {
			owner = net.JoinHostPort(core.Spec.ClusterIP, fmt.Sprint(port.Port))
		}
	}
	if owner == "" {
		t.Fatalf("the core's Service has no owner port: %+v", core.Spec.Ports)
	}
	dns := net.JoinHostPort(e.c.ClusterDNS().String(), "53")
	nbp := e.nbp.Addr()
	cells := [][2]string{{"connect", nbp}, {"udp", dns}, {"connect", dns}, {"connect", owner}}
	// The probes must work before any fault: the control shows nsenter
	// reaches the pod, the cells show they are refused at the start.
	out, err := exec.Command("nsenter", "--net="+netns, bin, "connect", net.JoinHostPort(pod.Status.PodIP, fmt.Sprint(plugins.DefaultPluginPort))).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "open" {
		t.Fatalf("control: the probe pod's own port from inside it: %v %q, want open", err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &prober{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			for _, c := range cells {
				// The pod's namespace outlives its processes' restarts;
				// a path that vanished with the pod is reported as such.
				out, err := exec.CommandContext(ctx, "nsenter", "--net="+netns, bin, c[0], c[1]).CombinedOutput()
				if ctx.Err() != nil {
					return
				}
				got := strings.TrimSpace(string(out))
				p.mu.Lock()
				p.n++
				if err != nil || got != "refused" && got != "timeout" {
					p.open = append(p.open, fmt.Sprintf("%s %s at %s: %q (%v)", c[0], c[1], time.Now().Format(time.TimeOnly), got, err))
				}
				p.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return p
}

func (p *prober) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// stop ends the probing and fails the test for every path found open.
func (p *prober) stop(t *testing.T) {
	t.Helper()
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	t.Logf("prober: %d attempts from the plugin's network namespace during the faults", p.n)
	if p.n == 0 {
		t.Error("the prober made no attempt")
	}
	for _, o := range p.open {
		t.Errorf("a path out of the plugin pod was not refused: %s", o)
	}
}
