//go:build cluster

package incluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/core"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/devstack"
	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/platform"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// platformDeployments are the platform's Deployments by the image each runs.
var platformDeployments = map[string]string{
	"openfief-operator":     "operator",
	"openfief-egress-proxy": "egress-proxy",
	"openfief-core":         "openfief-core",
}

// platformEnv is the real node with the platform installed on it, which
// the phases of TestPlatformInCluster share in order.
type platformEnv struct {
	root       string
	src        images.Source
	refs       map[string]plugins.ImageRef // the platform's images by spec name
	c          *devcluster.Cluster
	cs         kubernetes.Interface
	kubeconfig string
	work       string
	stack      *devstack.Stack
	preg       *pluginRegistry // plugin images, on the node's bridge (the stack's registry)
	private    *pluginRegistry // plugin images behind credentials, on the node's bridge
	// dockerConfigDir holds config.json with the private registry's
	// credentials for both its names, for the test's pushes and the CLI.
	dockerConfigDir string
	signer          *ocisign.KeySigner
	signersFile     string // the owner's signers, for `plugin install --signers`
	overlay         string // the admin's overlay the platform was installed from
	// backup is the core's record as the uninstall phase backed it up
	// before `platform uninstall --delete-data`, which the release phase
	// restores into the release's new core; backupRows its rows of
	// backupInstance then, backupRecordRows the record's rows.
	backup           string
	backupInstance   string
	backupRows       int
	backupRecordRows int
	release          *treeRelease      // the tree's release, once made
	probe            []byte            // the probe's binary, once built
	gate             plugins.ImageRef  // the check probe, the operator's isolation gate (OF-42)
	nbp              *devstack.FakeNBP // api.nbp.pl's stand-in, at a StandIn address
	dav              *devstack.FakeDAV // the owner's WebDAV server's stand-in, at a StandIn address
	begin            time.Time
}

// phase is one part of TestPlatformInCluster. A phase leaves the platform
// installed and every plugin it installed uninstalled, so the next starts
// from the same place; only the last three uninstall the platform.
type phase struct {
	name string
	run  func(t *testing.T, e *platformEnv)
}

// phases run in this order on one installed platform: a real node and the
// install take about a minute, so the package pays for them once.
var phases = []phase{
	{"installed", testInstalled},
	{"check", testCheck},
	{"lifecycle", testLifecycle},
	{"plugin-rollback", testPluginRollback},
	{"view", testView},
	{"private-registry", testPrivateRegistry},
	{"isolation", testIsolation},
	{"isolation-at-start", testIsolationAtStart},
	{"resources", testResourceBounds},
	{"check-isolation", testCheckIsolation},
	{"upgrade", testUpgradeRollback},
	{"registry-down", testRegistryDown}, // the plugins' registry stopped across an operator restart and an upgrade
	{"faults", testFaults},
	{"guide", testGuide}, // docs/plugin-authors.md as written
	// The core as three replicas on PostgreSQL: one killed mid-sync, one
	// cut off from the API server; back to one on SQLite afterwards.
	{"core-replicas", testCoreReplicas},
	{"uninstall", testUninstall}, // the platform is gone afterwards
	{"release", testRelease},     // installs a release on the empty node, and uninstalls it
	// Installs release A (an earlier commit's), upgrades it to the tree's
	// release and back, and uninstalls it.
	{"upgrade-release", testUpgradeFromRelease},
}

// TestPlatformInCluster installs the platform on a real node as a user
// does (installPlatform), then runs each of phases against it as a
// subtest. A failed phase does not stop the next: each checks its own
// starting point.
func TestPlatformInCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node and builds the platform's images: not in -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("a real node needs root: containers, cgroups, a bridge and netfilter rules")
	}
	e := installPlatform(t)
	for _, p := range phases {
		start := time.Now()
		t.Run(p.name, func(t *testing.T) { p.run(t, e) })
		t.Logf("phase %s: %s", p.name, time.Since(start).Round(100*time.Millisecond))
	}
}

// installPlatform starts the platform as `openfief dev --in-cluster` does
// (devstack's in-cluster mode): the three images built from this tree (or
// reused from .cache/images), a real node with the cluster DNS and a
// pre-made volume, the NBP and WebDAV stand-ins, a registry for plugin images on the
// node's bridge with the owner's key trusted through
// openfief-trusted-signers, a release overlay pinning the images
// (overlay.WritePlatform, as `make release-overlay` writes it) and the
// admin's overlay over it, installed with `openfief platform install
// --overlay`, in this process. Before the install it adds a second, private
// registry, whose credentials the operator reads from
// openfief-registry-config (the registry-config component in the admin's
// overlay, the Secret created first, as docs/operator.md says).
func installPlatform(t *testing.T) *platformEnv {
	ctx := context.Background()
	e := &platformEnv{begin: time.Now()}
	root, err := images.FindRoot(".")
	must(t, err)
	e.root = root
	e.work = t.TempDir()

	started = true
	stack, err := devstack.Start(ctx, devstack.Options{
		Dir: filepath.Join(e.work, "dev"), Node: devcluster.NodeReal, InCluster: true,
		Progress:      testLogWriter{t},
		CoreScheduler: core.SchedulerOptions{DefaultInterval: testSyncInterval},
		// The check-isolation phase stops the NetworkPolicy controller and
		// waits for the probes' gates to give up: 20 s, not a minute
		// (normal starts pass the gate in about 0.6 s).
		IsolationGateDeadline: testGateDeadline,
		// The registry-down phase waits for this retry once the registry
		// is back: 10 s, not a minute.
		RegistryRetry: testRegistryRetry,
		BeforeInstall: func(ctx context.Context, s *devstack.Stack) (devstack.DevOverlay, error) {
			e.c = s.Cluster
			if e.cs, err = s.Cluster.Clientset(); err != nil {
				return devstack.DevOverlay{}, err
			}
			startPrivateRegistry(t, e)
			return devstack.DevOverlay{
				Components:         []string{filepath.Join(root, "deploy", "operator", "components", "registry-config")},
				InsecureRegistries: []string{e.private.bridge},
			}, nil
		},
	})
	must(t, err)
	t.Cleanup(stack.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			dumpNamespace(t, e.cs, plugins.Namespace)
		}
	})
	e.stack, e.c, e.kubeconfig = stack, stack.Cluster, stack.KubeconfigPath
	// The tree as the images were built from it (a commit made while the
	// test runs changes what ReadSource would say now).
	e.src, e.refs, e.overlay, e.nbp, e.dav = stack.PlatformSource, stack.PlatformImages, stack.OverlayDir, stack.FakeNBP, stack.FakeDAV
	e.preg = &pluginRegistry{loopback: stack.RegistryLoopback, bridge: stack.RegistryHost}
	e.signer, e.signersFile = stack.Signer(), stack.SignersFile
	e.gate = stack.CheckProbeImage()
	if install, err := os.ReadFile(stack.InstallLog); err == nil {
		t.Logf("openfief platform install --overlay %s:\n%s", e.overlay, install)
	}
	t.Logf("the platform runs in-cluster, %s after the test began", time.Since(e.begin).Round(100*time.Millisecond))
	return e
}

// testLogWriter writes each line of devstack's progress to the test's log.
type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// testSyncInterval is how often the core syncs each connector in these
// tests: the admin's overlay sets it, where deploy/core syncs hourly.
const testSyncInterval = 5 * time.Second

// testGateDeadline is the installed operator's --isolation-gate-deadline in
// these tests.
const testGateDeadline = 20 * time.Second

// testRegistryRetry is the installed operator's --registry-retry in these
// tests.
const testRegistryRetry = 10 * time.Second

// probeBinary is the probe (internal/devcluster/testdata/probe) built
// statically, which plays a plugin under nbp-fx's manifest.
func (e *platformEnv) probeBinary(t *testing.T) []byte {
	t.Helper()
	if e.probe == nil {
		e.probe = buildStatic(t, e.root, "./internal/devcluster/testdata/probe")
	}
	return e.probe
}

// cli runs one openfief command against the cluster in this process and
// returns its exit code and everything it wrote.
func (e *platformEnv) cli(ctx context.Context, args ...string) (int, string) {
	var out bytes.Buffer
	code := cli.Main(ctx, append([]string{"--kubeconfig", e.kubeconfig}, args...),
		cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	return code, out.String()
}

// testInstalled checks what the install promises: the namespace holds pods
// to the restricted level, every Deployment is Available with its pods
// running the pinned image as containers of the node, the core's claim is
// bound to the node's pre-made volume, the core's NetworkPolicy names the
// API server the cluster publishes, and `platform status` agrees.
func testInstalled(t *testing.T, e *platformEnv) {
	ctx := context.Background()
	cs := e.cs
	ns, err := cs.CoreV1().Namespaces().Get(ctx, plugins.Namespace, metav1.GetOptions{})
	must(t, err)
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
		t.Errorf("namespace %s enforces Pod Security level %q, want restricted", ns.Name, got)
	}

	for name, image := range platformDeployments {
		d, err := cs.AppsV1().Deployments(plugins.Namespace).Get(ctx, name, metav1.GetOptions{})
		must(t, err)
		if !platform.DeploymentAvailable(d) {
			t.Errorf("%s is not Available after install: %d/%d", name, d.Status.AvailableReplicas, *d.Spec.Replicas)
			continue
		}
		want := e.refs[image].String()
		pods, err := cs.CoreV1().Pods(plugins.Namespace).List(ctx, metav1.ListOptions{
			LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector),
		})
		must(t, err)
		running := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
				continue
			}
			for _, st := range p.Status.ContainerStatuses {
				if st.State.Running == nil || !strings.HasPrefix(st.ContainerID, "containerd://") {
					t.Errorf("%s: pod %s container %s is not a running container: %+v", name, p.Name, st.Name, st.State)
					continue
				}
				if st.RestartCount > 0 {
					t.Errorf("%s: pod %s container %s restarted %d times", name, p.Name, st.Name, st.RestartCount)
				}
				if p.Spec.Containers[0].Image != want {
					t.Errorf("%s: pod %s runs %s, want %s", name, p.Name, p.Spec.Containers[0].Image, want)
				}
			}
			running++
		}
		if running != int(*d.Spec.Replicas) {
			t.Errorf("%s: %d pods Running, want %d", name, running, *d.Spec.Replicas)
		}
		t.Logf("%s: Available, %d pods running %s as containers", name, running, want)
	}

	pvc, err := cs.CoreV1().PersistentVolumeClaims(plugins.Namespace).Get(ctx, "openfief-core-data", metav1.GetOptions{})
	must(t, err)
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		t.Errorf("the core's claim is %s (volume %q), want Bound", pvc.Status.Phase, pvc.Spec.VolumeName)
	}

	apiCIDRs, err := platform.DiscoverAPIServer(ctx, mustClient(t, e.c))
	must(t, err)
	np, err := cs.NetworkingV1().NetworkPolicies(plugins.Namespace).Get(ctx, "openfief-core", metav1.GetOptions{})
	must(t, err)
	if got := policyCIDRs(np); !sameSet(got, apiCIDRs) {
		t.Errorf("the core's NetworkPolicy names %v, want the API server's %v", got, apiCIDRs)
	}

	loose := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-security-probe", Namespace: plugins.Namespace},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: e.refs["operator"].String()}}},
	}
	if _, err := cs.CoreV1().Pods(plugins.Namespace).Create(ctx, loose, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PodSecurity") {
		t.Errorf("a pod that is not hardened: %v, want refused by PodSecurity", err)
	}

	code, out := e.cli(ctx, "platform", "status")
	t.Logf("openfief platform status: exit %d\n%s", code, out)
	if code != cli.ExitOK {
		t.Errorf("openfief platform status exited %d", code)
	}
}

// lastLines are the lines of text that start (after spaces) with one of
// prefixes, joined.
func lastLines(text string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(strings.TrimSpace(l), p) {
				out = append(out, strings.TrimSpace(l))
			}
		}
	}
	return strings.Join(out, " | ")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// policyCIDRs are the ipBlock CIDRs a NetworkPolicy names, deduplicated.
func policyCIDRs(np *networkingv1.NetworkPolicy) []string {
	seen := map[string]bool{}
	var out []string
	add := func(peers []networkingv1.NetworkPolicyPeer) {
		for _, p := range peers {
			if p.IPBlock != nil && !seen[p.IPBlock.CIDR] {
				seen[p.IPBlock.CIDR] = true
				out = append(out, p.IPBlock.CIDR)
			}
		}
	}
	for _, r := range np.Spec.Ingress {
		add(r.From)
	}
	for _, r := range np.Spec.Egress {
		add(r.To)
	}
	return out
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]bool{}
	for _, s := range a {
		m[s] = true
	}
	for _, s := range b {
		if !m[s] {
			return false
		}
	}
	return true
}

// dumpNamespace logs where the pods of ns stand, their events and the last
// lines of each container's log, for a failed test.
func dumpNamespace(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("listing pods in %s: %v", ns, err)
		return
	}
	tail := int64(30)
	for _, p := range pods.Items {
		var states []string
		for _, st := range p.Status.ContainerStatuses {
			states = append(states, fmt.Sprintf("%s ready=%v restarts=%d state=%+v last=%+v", st.Name, st.Ready, st.RestartCount, st.State, st.LastTerminationState))
		}
		t.Logf("pod %s: %s %s", p.Name, p.Status.Phase, strings.Join(states, "; "))
		for _, ctr := range p.Spec.Containers {
			for _, previous := range []bool{false, true} {
				b, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: ctr.Name, TailLines: &tail, Previous: previous}).DoRaw(ctx)
				if err == nil && len(b) > 0 {
					t.Logf("log of %s/%s (previous=%v):\n%s", p.Name, ctr.Name, previous, b)
				}
			}
		}
	}
	events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range events.Items {
			if e.Type != corev1.EventTypeNormal {
				t.Logf("event %s %s/%s: %s: %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	}
}

// mustClient is a controller-runtime client of c as the cluster admin.
func mustClient(t *testing.T, c *devcluster.Cluster) client.Client {
	t.Helper()
	s, err := apiconv.NewScheme()
	must(t, err)
	cl, err := client.New(c.Config, client.Options{Scheme: s})
	must(t, err)
	return cl
}
