//go:build cluster

package devcluster_test

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"

	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/ocisign"
)

// skipUnlessRealNode skips where a real node cannot run at all: not root.
// Missing binaries are a failure (make test builds them).
func skipUnlessRealNode(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real node (containerd, kubelet, kube-proxy, kube-router): not in -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("a real node needs root: containers, cgroups, a bridge and netfilter rules")
	}
}

// ownRealNode prepares a test that starts a real node of its own: it skips
// where none can run, and stops the package's shared node if it runs (the
// machine runs one real node at a time), checking what it left.
func ownRealNode(t *testing.T) {
	t.Helper()
	skipUnlessRealNode(t)
	if err := devcluster.StopSharedNode(); err != nil {
		t.Fatalf("stopping the shared real node: %v", err)
	}
}

// TestRealNode starts a control plane with a real node, runs a pod under the
// restricted Pod Security Standard from an image in a loopback registry, reads
// its log and execs into it, then stops everything and checks the machine
// holds nothing of the node any more.
func TestRealNode(t *testing.T) {
	ownRealNode(t)
	before := readSysctls(t)
	// containerd's opt plugin makes this unless told to use the state
	// folder; the node must not leave it on a machine that had none.
	_, optErr := os.Stat("/opt/containerd")
	optBefore := optErr == nil
	start := time.Now()
	c, err := devcluster.Start(t.Context(), devcluster.Options{Mode: devcluster.Full, Node: devcluster.NodeReal, StartTimeout: 2 * time.Minute, Output: nodeOutput(t)})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Stop()
		}
	}()
	t.Logf("control plane and real node Ready in %v (state in %s)", time.Since(start).Round(time.Millisecond), c.NodeStateDir())

	image := pushProbe(t, c.NodeRegistry())
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	runProbePod(t, cs, image)

	var logs []byte
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		logs, err = cs.CoreV1().Pods("probe").GetLogs("probe", &corev1.PodLogOptions{}).DoRaw(ctx)
		return err == nil && len(logs) > 0, nil
	}); err != nil {
		t.Fatalf("no log: %v", err)
	}
	if want := "probe: uid=65534 gid=65534 seccomp=2 root-writable=false"; !strings.Contains(string(logs), want) {
		t.Errorf("log %q; want %q (non-root, seccomp filter, read-only root)", logs, want)
	}
	out := execIn(ctx, t, c, cs, "probe", "probe", "/probe", "whoami")
	if want := "exec: uid=65534 gid=65534"; !strings.Contains(out, want) {
		t.Errorf("exec printed %q; want %q", out, want)
	}

	// The leftovers check sees the running node: it can fail.
	assertSeesRunningNode(t, c.NodeStateDir())
	if during := readSysctls(t); maps.Equal(before, during) {
		t.Logf("no sysctl changed while the node ran (%v)", during)
	} else {
		t.Logf("sysctls while the node runs: %v (before: %v)", during, before)
	}

	dir := c.NodeStateDir()
	stopStart := time.Now()
	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("stopped and cleaned up in %v", time.Since(stopStart).Round(time.Millisecond))
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state folder %s still there: %v", dir, err)
	}
	assertNoLeftovers(t)
	if after := readSysctls(t); !maps.Equal(before, after) {
		t.Errorf("sysctls %v after the node; want %v as before", after, before)
	}
	if _, err := os.Stat("/opt/containerd"); err == nil && !optBefore {
		t.Error("the node left /opt/containerd, which was not there before it")
	}
}

// readSysctls reads the kernel settings the kubelet, the bridge plugin and
// kube-proxy may change (the kubelet's six kernel defaults among them).
func readSysctls(t *testing.T) map[string]string {
	t.Helper()
	values := map[string]string{}
	for _, k := range []string{
		"kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory", "vm/panic_on_oom",
		"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
		"net/ipv4/ip_forward", "net/ipv4/conf/all/route_localnet",
	} {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			t.Fatal(err)
		}
		values[k] = strings.TrimSpace(string(v))
	}
	return values
}

// assertNoLeftovers fails the test with every trace of a real node left on
// the machine.
func assertNoLeftovers(t *testing.T) {
	t.Helper()
	left, err := devcluster.NodeLeftoversWhenIdle(devcluster.NodeLockWait())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range left {
		t.Errorf("left behind: %s", l)
	}
}

// startProbeNode starts a full cluster on a real node of the test's own,
// stopped (and the machine checked for leftovers) when the test ends, pushes
// the probe image and creates namespace probe.
func startProbeNode(t *testing.T) (*devcluster.Cluster, kubernetes.Interface, string) {
	t.Helper()
	ownRealNode(t)
	opts := devcluster.Options{Mode: devcluster.Full, Node: devcluster.NodeReal, StartTimeout: 2 * time.Minute, Output: nodeOutput(t)}
	c, err := devcluster.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
		assertNoLeftovers(t)
	})
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	image := pushProbe(t, c.NodeRegistry())
	createProbeNamespace(t, cs, "probe")
	return c, cs, image
}

// bridgeListener listens on the node's bridge address, as a peer outside
// the pod network that pods would reach if a policy let them, accepting and
// closing every connection until the test ends; it returns host:port.
func bridgeListener(t *testing.T, c *devcluster.Cluster) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(c.NodeGateway().String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_ = conn.Close()
		}
	}()
	return l.Addr().String()
}

// runProbePod runs the probe image as pod probe/probe in a namespace that
// enforces the restricted Pod Security Standard and waits until it runs.
func runProbePod(t *testing.T, cs kubernetes.Interface, image string) {
	t.Helper()
	createProbeNamespace(t, cs, "probe")
	runProbePods(t, cs, "probe", image, "probe")
}

// createProbeNamespace creates namespace name, which enforces the
// restricted Pod Security Standard.
func createProbeNamespace(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runProbePods runs one probe pod per name in namespace ns, waits until
// they all run, and returns their IPs by name.
func runProbePods(t *testing.T, cs kubernetes.Interface, ns, image string, names ...string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	for _, name := range names {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, restrictedPod(ns, name, image), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ips := map[string]string{}
	for _, name := range names {
		var pod *corev1.Pod
		if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			var err error
			pod, err = cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && pod.Status.Phase == corev1.PodRunning, nil
		}); err != nil {
			t.Fatalf("pod %s not Running: %v; status %+v", name, err, pod.Status)
		}
		ips[name] = pod.Status.PodIP
	}
	t.Logf("pods %v Running in %v: %v", names, time.Since(start).Round(time.Millisecond), ips)
	return ips
}

// assertSeesRunningNode checks that NodeLeftovers lists every kind of trace
// of the running node with state folder dir.
func assertSeesRunningNode(t *testing.T, dir string) {
	t.Helper()
	left, err := devcluster.NodeLeftovers()
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(left, "\n")
	id := filepath.Base(dir)
	for _, want := range []string{
		"state folder " + dir,
		"process ",
		"link of-" + id,
		"link on our bridge: veth",
		"mount " + dir,
		"iptables rule: -N KUBE-ROUTER-FORWARD",
		"nft table ip kube-proxy",
		"cgroup /sys/fs/cgroup/memory/of-node-" + id,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("NodeLeftovers while the node runs lacks %q; it lists:\n%s", want, all)
		}
	}
}

// pushProbe builds testdata/probe statically, wraps it in an image that runs
// as 65534 and pushes it to the loopback registry; it returns the reference.
func pushProbe(t *testing.T, registry string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "probe")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/probe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	img, err := ocisign.BinaryImage("probe", data, "65534:65534")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := ocisign.Push(t.Context(), registry, "openfief/probe", img)
	if err != nil {
		t.Fatal(err)
	}
	return ref.String()
}

// restrictedPod is a pod named name in namespace ns, labelled app=name,
// that the restricted Pod Security Standard admits.
func restrictedPod(ns, name, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](65534),
				RunAsGroup:     ptr.To[int64](65534),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:  "probe",
				Image: image,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// execIn runs command in the pod's container through the API server and the
// kubelet, and returns its standard output.
func execIn(ctx context.Context, t *testing.T, c *devcluster.Cluster, cs kubernetes.Interface, ns, pod string, command ...string) string {
	t.Helper()
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: command, Stdout: true, Stderr: true}, clientgoscheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(c.Config, "POST", req.URL())
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		t.Fatalf("exec %v: %v (stderr %q)", command, err, stderr.String())
	}
	return stdout.String()
}

// nodeOutput is where the node's processes write besides their logs:
// the file OPENFIEF_NODE_LOG names, for debugging, or nowhere.
func nodeOutput(t *testing.T) io.Writer {
	p := os.Getenv("OPENFIEF_NODE_LOG")
	if p == "" {
		return nil
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}
