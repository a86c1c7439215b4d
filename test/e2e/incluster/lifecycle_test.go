//go:build cluster

package incluster

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// testLifecycle walks nbp-fx, signed by the owner, through the demo's
// lifecycle on the installed platform, with every part a pod: install and
// approve (the operator's pod verifies the image, the kubelet pulls it);
// the core's pod calls it through plugin-nbp-fx.openfief.svc, the plugin
// reaches the NBP stand-in through the egress proxy's pods (which resolve
// api.nbp.pl through the cluster DNS), and the core stores the rates on its
// claim, where they outlive the core's pod; an upgrade asking for one more
// host waits for approval while the previous version keeps syncing; revoking
// the grant stops the core's calls; uninstall.
func testLifecycle(t *testing.T, e *platformEnv) {
	ctx := context.Background()
	const instance = "fx"
	v1 := e.preg.publishNBPFx(t, e.root, e.signer, e.nbp.CAPEM())
	v2 := e.preg.publishNBPFx(t, e.root, e.signer, e.nbp.CAPEM(), "static.nbp.pl")
	openfief(t, e.kubeconfig, "plugin", "install", instance, "--image", v1.String(), "--signers", e.signersFile, "--insecure-registry", e.preg.bridge)
	openfief(t, e.kubeconfig, "plugin", "wait", instance, "--for", "NoGrant", "--timeout", "60s")
	openfief(t, e.kubeconfig, "plugin", "approve", instance, "--yes")
	openfief(t, e.kubeconfig, "plugin", "wait", instance, "--for", "Running", "--timeout", "3m")
	pod := runningPluginPod(t, e.cs, instance)
	t.Logf("plugin pod %s (%s) Running as a container", pod.Name, pod.Status.PodIP)

	// The core's first sync stores the stand-in's rates.
	st := waitCoreStatus(t, e, instance, 2*time.Minute, "a successful sync with FX rates stored", func(s coreStatus) bool {
		return s.succeeded && s.fxRates > 0
	})
	t.Logf("the core's pod synced %s: %s", instance, st.summary)
	if e.nbp.Requests.Load() == 0 {
		t.Error("the NBP stand-in answered no request, yet the core stored rates")
	}

	// The rates are on the core's claim: a new core pod has them.
	stored := st.rows
	deletePods(t, e, "openfief-core")
	waitPlatformAvailable(t, e)
	st = waitCoreStatus(t, e, instance, time.Minute, "the new core pod to report the stored rows", func(s coreStatus) bool {
		return s.rows >= stored
	})
	t.Logf("after the core's pod was replaced: %s", st.summary)

	// An upgrade that asks for one more host waits for the owner; the
	// previous version keeps running and the core keeps syncing it.
	openfief(t, e.kubeconfig, "plugin", "upgrade", instance, "--image", v2.String(), "--signers", e.signersFile, "--insecure-registry", e.preg.bridge)
	openfief(t, e.kubeconfig, "plugin", "wait", instance, "--for", "RunningPreviousVersion", "--timeout", "60s")
	if p := runningPluginPod(t, e.cs, instance); p.UID != pod.UID || p.Spec.Containers[0].Image != v1.String() {
		t.Errorf("while the upgrade waits for approval the pod is %s running %s; want %s running %s", p.Name, p.Spec.Containers[0].Image, pod.Name, v1)
	}
	syncedAfter(t, e, instance, time.Now(), "the previous version to sync again while the upgrade waits")
	openfief(t, e.kubeconfig, "plugin", "approve", instance, "--yes")
	openfief(t, e.kubeconfig, "plugin", "wait", instance, "--for", "Running", "--timeout", "3m")
	testutil.Eventually(t, 2*time.Minute, "the approved version's pod", func() (bool, string) {
		pods, err := e.cs.CoreV1().Pods(plugins.Namespace).List(ctx, metav1.ListOptions{LabelSelector: plugins.LabelPluginName + "=" + instance})
		if err != nil {
			return false, err.Error()
		}
		var images []string
		for _, p := range pods.Items {
			images = append(images, p.Spec.Containers[0].Image)
		}
		return len(pods.Items) == 1 && pods.Items[0].Spec.Containers[0].Image == v2.String() && pods.Items[0].Status.Phase == corev1.PodRunning, fmt.Sprint(images)
	})
	syncedAfter(t, e, instance, time.Now(), "the new version to sync")

	// Revoking stops the core's calls: no request reaches NBP afterwards.
	openfief(t, e.kubeconfig, "plugin", "revoke", instance, "--yes")
	openfief(t, e.kubeconfig, "plugin", "wait", instance, "--for", "NoGrant", "--timeout", "60s")
	waitCoreStatus(t, e, instance, time.Minute, "the core to stop calling the revoked plugin", func(s coreStatus) bool { return !s.called })
	testutil.Eventually(t, time.Minute, "the plugin's pods gone after revoke", func() (bool, string) {
		pods, err := e.cs.CoreV1().Pods(plugins.Namespace).List(ctx, metav1.ListOptions{LabelSelector: plugins.LabelPluginName + "=" + instance})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items))
	})
	// The plugin's tunnels through the proxy closed with its pods: a proxy
	// pod logged one it allowed to the stand-in.
	checkProxyDecision(t, e, instance, "api.nbp.pl:443")
	// The core syncs every testSyncInterval: two intervals with no sync
	// recorded show the calls stopped. The sleep bounds a window in which
	// something must not happen; it stands in for no condition.
	revoked, _ := readCoreStatus(ctx, e, instance)
	time.Sleep(2 * testSyncInterval)
	if later, _ := readCoreStatus(ctx, e, instance); !later.lastSync.Equal(revoked.lastSync) || later.called {
		t.Errorf("the core synced the revoked plugin: %s, then %s", revoked.summary, later.summary)
	}
	openfief(t, e.kubeconfig, "plugin", "uninstall", instance, "--yes", "--wait", "60s")
}

// coreStatus is what `openfief plugin status` reports of the core's syncs
// of a connector, or its exports to a view (view set).
type coreStatus struct {
	called, view, succeeded bool
	// lastSync is the last sync's or export's time.
	lastSync      time.Time
	rows, fxRates int
	// counts are the rows stored: the total, then batches, transactions,
	// postings, balances, prices, FX rates, index readings and problems.
	counts  [9]int
	summary string
}

var (
	rowsLine     = regexp.MustCompile(`Rows:\s+(\d+) stored \(batches (\d+), transactions (\d+), postings (\d+), balances (\d+), prices (\d+), FX rates (\d+), index readings (\d+), problems (\d+)\)`)
	lastSyncLine = regexp.MustCompile(`Last (?:sync|export):\s+(\S+) \(`)
	succeeded    = regexp.MustCompile(`Last (?:sync|export): .*, succeeded`)
)

// readCoreStatus runs `openfief plugin status` and reads its core section.
func readCoreStatus(ctx context.Context, e *platformEnv, instance string) (coreStatus, string) {
	code, out := e.cli(ctx, "plugin", "status", instance)
	var s coreStatus
	s.summary = lastLines(out, "Called:", "Last sync:", "Last export:", "Last error:", "Rows:")
	if code != cli.ExitOK {
		return s, fmt.Sprintf("exit %d: %s", code, out)
	}
	s.called = strings.Contains(out, "Called:     yes")
	s.view = strings.Contains(out, "Called:     yes, as a view")
	s.succeeded = succeeded.MatchString(out)
	if m := lastSyncLine.FindStringSubmatch(out); m != nil {
		s.lastSync, _ = time.Parse(time.RFC3339, m[1])
	}
	if m := rowsLine.FindStringSubmatch(out); m != nil {
		for i := range s.counts {
			s.counts[i], _ = strconv.Atoi(m[i+1])
		}
		s.rows, s.fxRates = s.counts[0], s.counts[6]
	}
	return s, s.summary
}

// waitCoreStatus polls the core's status of instance until ok holds.
func waitCoreStatus(t *testing.T, e *platformEnv, instance string, within time.Duration, what string, ok func(coreStatus) bool) coreStatus {
	t.Helper()
	var last coreStatus
	testutil.Eventually(t, within, what, func() (bool, string) {
		s, msg := readCoreStatus(context.Background(), e, instance)
		last = s
		return ok(s), msg
	})
	return last
}

// syncedAfter waits until the core records a successful sync of instance
// that began after since (the status has whole seconds).
func syncedAfter(t *testing.T, e *platformEnv, instance string, since time.Time, what string) coreStatus {
	t.Helper()
	return waitCoreStatus(t, e, instance, 2*time.Minute, what, func(s coreStatus) bool {
		return s.succeeded && s.lastSync.After(since.Truncate(time.Second))
	})
}

// checkProxyDecision waits until an egress proxy pod has logged that it
// allowed a tunnel of plugin to target, and returns the line. The proxy
// logs a tunnel when it closes, which the plugin's HTTP client delays while
// the connection idles (90 s) unless its pod goes.
func checkProxyDecision(t *testing.T, e *platformEnv, plugin, target string) string {
	t.Helper()
	ctx := context.Background()
	var logged string
	testutil.Eventually(t, 2*time.Minute, "an egress proxy pod allowing "+plugin+"'s tunnel to "+target, func() (bool, string) {
		pods, err := e.cs.CoreV1().Pods(plugins.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=openfief-egress-proxy"})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			b, err := e.cs.CoreV1().Pods(plugins.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, `"plugin":"`+plugin+`"`) && strings.Contains(line, `"target":"`+target+`"`) && strings.Contains(line, `"decision":"allow"`) {
					t.Logf("egress proxy pod %s: %s", p.Name, line)
					logged = line
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%d proxy pods, no decision logged", len(pods.Items))
	})
	return logged
}
