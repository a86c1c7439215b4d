//go:build cluster

package incluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/arkadiuss/openfief/internal/check"
	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// Starts measured by testIsolationAtStart: with the gate, gatedStarts in
// all (each attacker's install, pod deletions, an upgrade), shared by
// attackers plugins that start at the same time, as plugins do on a busy
// node (most of a start is waiting: for the pod, the gate and the attack
// window); without it, up to ungatedStarts until one finds the window open.
const (
	gatedStarts   = 20
	attackers     = 4
	ungatedStarts = 5
	// attackWindow is how long the attacker keeps trying after its process
	// starts: far past the 80-700 ms the window lasted without the gate.
	attackWindow = 2500 * time.Millisecond
)

// attackResult is one target's line of `probe at-start`
// (internal/devcluster/testdata/probe/atstart.go).
type attackResult struct {
	Name            string         `json:"name"`
	Kind            string         `json:"kind"`
	Addr            string         `json:"addr"`
	Attempts        int            `json:"attempts"`
	Open            int            `json:"open"`
	FirstOpenMillis int64          `json:"firstOpenMillis"`
	FirstMillis     int64          `json:"firstMillis"`
	Outcomes        map[string]int `json:"outcomes"`
}

// testIsolationAtStart is OF-42's proof on the real node: a plugin that
// attacks from its first instruction (the probe with an attack plan in its
// image: DNS over UDP and TCP to the cluster DNS and the node's resolver,
// TCP to the API server, to an institution's address and to the node's
// registries, each over and over for attackWindow) finds nothing open at
// any time, over gatedStarts starts: the first install, pod deletions and
// an upgrade. Then the operator is told to run plugins without the gate,
// and the same attacker must find the window open within ungatedStarts
// starts, so the test can fail. It logs the gate's start cost.
func testIsolationAtStart(t *testing.T, e *platformEnv) {
	ctx := context.Background()
	cs := e.cs
	apiIP, apiPort := apiServerEndpoint(t, cs)
	dnsSvc, err := cs.CoreV1().Services(metav1.NamespaceSystem).Get(ctx, devcluster.ClusterDNSService, metav1.GetOptions{})
	must(t, err)
	gw := e.c.NodeGateway().String()
	targets := []map[string]string{
		{"name": "cluster DNS (resolv.conf) udp", "kind": "dns-udp", "addr": "resolv.conf"},
		{"name": "cluster DNS (resolv.conf) tcp", "kind": "dns-tcp", "addr": "resolv.conf"},
		{"name": "cluster DNS Service udp", "kind": "dns-udp", "addr": net.JoinHostPort(dnsSvc.Spec.ClusterIP, "53")},
		{"name": "node's resolver udp", "kind": "dns-udp", "addr": net.JoinHostPort(gw, "53")},
		{"name": "node's resolver tcp", "kind": "dns-tcp", "addr": net.JoinHostPort(gw, "53")},
		{"name": "API server Service", "kind": "tcp", "addr": "api-server"},
		{"name": "API server endpoint", "kind": "tcp", "addr": net.JoinHostPort(apiIP, strconv.Itoa(apiPort))},
		{"name": "institution (NBP stand-in)", "kind": "tcp", "addr": e.nbp.Addr()},
		{"name": "node's registry", "kind": "tcp", "addr": e.c.NodeRegistry()},
		{"name": "plugin registry on the bridge", "kind": "tcp", "addr": e.preg.bridge},
	}
	m := nbpFxManifest(t, e.root)
	publish := func(version int) plugins.ImageRef {
		plan, err := json.Marshal(map[string]any{"windowMillis": attackWindow.Milliseconds(), "targets": targets, "version": version})
		must(t, err)
		return e.preg.publish(t, "plugins/attacker", m, map[string][]byte{"plugin": e.probeBinary(t), "attack.json": plan}, e.signer)
	}
	v1, v2 := publish(1), publish(2)

	var (
		mu        sync.Mutex
		gateTimes []time.Duration
		// lastGated is attacker-0's last gated pod, which the ungated
		// starts below must not count.
		lastGated types.UID
	)
	// measure waits for a new running pod of plugin (not prev), reads what
	// its attacker found and, when gated, the gate's time; it fails the
	// test for a target never tried and returns what was open.
	measure := func(t *testing.T, plugin string, prev types.UID, how string, gated bool) (types.UID, []attackResult, []string) {
		t.Helper()
		pod := newRunningPod(t, e, plugin, prev)
		results := attackResults(t, e, pod)
		if gated {
			d := gateTime(t, e, pod)
			mu.Lock()
			gateTimes = append(gateTimes, d)
			mu.Unlock()
		}
		var opened []string
		for _, r := range results {
			if r.Attempts == 0 {
				t.Errorf("%s: %s (%s %s) was never tried", how, r.Name, r.Kind, r.Addr)
			}
			if r.Open > 0 {
				opened = append(opened, fmt.Sprintf("%s: %s (%s %s) open %d of %d attempts, first at %d ms",
					how, r.Name, r.Kind, r.Addr, r.Open, r.Attempts, r.FirstOpenMillis))
			}
		}
		return pod.UID, results, opened
	}
	install := func(t *testing.T, plugin string) {
		t.Helper()
		openfief(t, e.kubeconfig, "plugin", "install", plugin, "--image", v1.String(), "--signers", e.signersFile, "--insecure-registry", e.preg.bridge)
		uninstallOnFailure(t, e, plugin)
		openfief(t, e.kubeconfig, "plugin", "approve", plugin, "--yes")
	}

	// With the gate: each attacker's install, deletions, its upgrade,
	// deletions; all the attackers at once (TestMain lets that many
	// parallel subtests run together).
	name := func(k int) string { return fmt.Sprintf("attacker-%d", k) }
	t.Run("gated", func(t *testing.T) {
		for k := range attackers {
			t.Run(name(k), func(t *testing.T) {
				t.Parallel()
				plugin, starts := name(k), gatedStarts/attackers
				install(t, plugin)
				var prev types.UID
				for i := range starts {
					how := fmt.Sprintf("%s start %d/%d (pod deleted)", plugin, i+1, starts)
					switch i {
					case 0:
						how = fmt.Sprintf("%s start 1/%d (install)", plugin, starts)
					case starts / 2:
						how = fmt.Sprintf("%s start %d/%d (upgrade)", plugin, i+1, starts)
						openfief(t, e.kubeconfig, "plugin", "upgrade", plugin, "--image", v2.String(), "--signers", e.signersFile, "--insecure-registry", e.preg.bridge)
					default:
						deletePods(t, e, plugins.ServiceAccountName(plugin))
					}
					var results []attackResult
					var opened []string
					prev, results, opened = measure(t, plugin, prev, how, true)
					for _, o := range opened {
						t.Errorf("with the isolation gate, %s", o)
					}
					if i == 0 && k == 0 {
						for _, r := range results {
							t.Logf("first start: %-32s %-8s %-22s %4d attempts from %d ms: %v", r.Name, r.Kind, r.Addr, r.Attempts, r.FirstMillis, r.Outcomes)
						}
					}
				}
				if k == 0 {
					lastGated = prev
				} else {
					openfief(t, e.kubeconfig, "plugin", "uninstall", plugin, "--yes", "--wait", "60s")
				}
			})
		}
	})
	slices.Sort(gateTimes)
	if len(gateTimes) > 0 {
		t.Logf("the gate's start cost over %d starts (its own measure, from its log): median %v, worst %v, all %v",
			len(gateTimes), gateTimes[len(gateTimes)/2], gateTimes[len(gateTimes)-1], gateTimes)
	}
	if len(gateTimes) != gatedStarts && !t.Failed() {
		t.Errorf("measured %d gated starts, want %d", len(gateTimes), gatedStarts)
	}

	// Without the gate, the same attacker finds the window (the test can
	// fail): the operator restarts without it and rolls the plugin's pod.
	if t.Failed() {
		return
	}
	setOperatorGate(t, e, false)
	defer setOperatorGate(t, e, true)
	// attacker-0, still installed: the operator rolls its pod without the
	// gate, a start not yet measured.
	plugin := name(0)
	prev := lastGated
	var opened []string
	for i := range ungatedStarts {
		if i > 0 {
			deletePods(t, e, plugins.ServiceAccountName(plugin))
		}
		prev, _, opened = measure(t, plugin, prev, fmt.Sprintf("ungated start %d", i+1), false)
		if len(opened) > 0 {
			break
		}
	}
	if len(opened) == 0 {
		t.Errorf("without the isolation gate, %d starts found nothing open: the test cannot tell the gate from no gate", ungatedStarts)
	}
	for _, o := range opened {
		t.Logf("without the gate (as expected), %s", o)
	}
	openfief(t, e.kubeconfig, "plugin", "uninstall", plugin, "--yes", "--wait", "60s")

	// The owner's check sees the same window: its at-start cells differ
	// while the gate is off (testCheckIsolation shows them passing with
	// it). The window is a race, so a few runs may be needed.
	if _, err := e.c.StandIn("example.com"); err != nil {
		t.Fatalf("a stand-in for example.com: %v", err)
	}
	ref := releaseProbe(t, e)
	args := []string{"check", "--isolation", "--probe-image", ref.String(), "--outside-address", e.nbp.Addr(), "--insecure-registry", ref.Registry(), "--settle", "5s", "-o", "json"}
	var seen []string
	for run := range 3 {
		code, out := e.cli(ctx, args...)
		doc := isolationDoc(t, code, out)
		for _, d := range differing(doc) {
			if strings.HasPrefix(d, check.AtStartPrefix) {
				seen = append(seen, d)
			} else {
				t.Errorf("check run %d without the gate: %q differs, which only its first seconds should", run+1, d)
			}
		}
		t.Logf("check --isolation without the gate, run %d: exit %d, differing %q", run+1, code, differing(doc))
		if len(seen) > 0 {
			if code != cli.ExitFailure {
				t.Errorf("the check found the window but exited %d", code)
			}
			break
		}
	}
	if len(seen) == 0 {
		t.Error("without the isolation gate, 3 runs of check --isolation found no at-start cell reachable")
	}
}

// newRunningPod waits for the plugin's pod other than prev to run, with
// its gate (if any) done; terminating pods are ignored.
func newRunningPod(t *testing.T, e *platformEnv, plugin string, prev types.UID) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	testutil.Eventually(t, 3*time.Minute, "a new pod of "+plugin+" running", func() (bool, string) {
		pods, err := e.cs.CoreV1().Pods(plugins.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: plugins.LabelPluginName + "=" + plugin})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for i := range pods.Items {
			p := &pods.Items[i]
			seen = append(seen, fmt.Sprintf("%s %s %v", p.Name, p.Status.Phase, p.DeletionTimestamp != nil))
			if p.UID == prev || p.DeletionTimestamp != nil {
				continue
			}
			if p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil {
				pod = p
				return true, ""
			}
		}
		return false, strings.Join(seen, "; ")
	})
	return pod
}

// attackResults waits until the attacker in pod has written its results.
func attackResults(t *testing.T, e *platformEnv, pod *corev1.Pod) []attackResult {
	t.Helper()
	var out []attackResult
	testutil.Eventually(t, 30*time.Second, "the attacker's results in "+pod.Name, func() (bool, string) {
		raw := strings.TrimSpace(execIn(t, e.c, e.cs, pod, "/plugin", "at-start"))
		if !strings.HasPrefix(raw, "[") {
			return false, raw
		}
		if err := json.Unmarshal([]byte(raw), &out); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	return out
}

// gateLine is what the gate prints once isolation is in place.
var gateLine = regexp.MustCompile(`isolation gate: in place after ([0-9.]+[mµn]?s)`)

// gateTime is how long the gate of pod took by its own measure (its log),
// and logs the gate's container timing from the pod's status.
func gateTime(t *testing.T, e *platformEnv, pod *corev1.Pod) time.Duration {
	t.Helper()
	raw, err := e.cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: plugins.GateContainerName}).Do(context.Background()).Raw()
	must(t, err)
	m := gateLine.FindStringSubmatch(string(raw))
	if m == nil {
		t.Errorf("pod %s: the gate's log says no time: %q", pod.Name, raw)
		return 0
	}
	d, err := time.ParseDuration(m[1])
	must(t, err)
	return d
}

// setOperatorGate turns the installed operator's isolation gate off or on
// (--isolation-gate=false added or removed) and waits until the operator
// runs with it.
func setOperatorGate(t *testing.T, e *platformEnv, on bool) {
	t.Helper()
	ctx := context.Background()
	d, err := e.cs.AppsV1().Deployments(plugins.Namespace).Get(ctx, "openfief-operator", metav1.GetOptions{})
	must(t, err)
	args := slices.DeleteFunc(slices.Clone(d.Spec.Template.Spec.Containers[0].Args), func(a string) bool { return a == "--isolation-gate=false" })
	if !on {
		args = append(args, "--isolation-gate=false")
	}
	patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": args}})
	must(t, err)
	_, err = e.cs.AppsV1().Deployments(plugins.Namespace).Patch(ctx, "openfief-operator", types.JSONPatchType, patch, metav1.PatchOptions{})
	must(t, err)
	waitPlatformAvailable(t, e)
}
