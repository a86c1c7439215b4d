//go:build cluster

package incluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/platform"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// upgradeInstances are the nbp-fx instances the upgrade phase runs while the
// platform changes under them. The admin's site overlay has the core sync
// every testSyncInterval (its default is hourly), so the phase sees calls
// go on within seconds.
var upgradeInstances = []string{"fx-a", "fx-b", "fx-c"}

// proxyGrace is deploy/egress-proxy's --shutdown-grace, and
// proxyTermination its pods' terminationGracePeriodSeconds: past it the
// kubelet kills the proxy.
const (
	proxyGrace       = 20 * time.Second
	proxyTermination = 30 * time.Second
)

// testUpgradeRollback runs three plugins, upgrades the platform to a build
// of this tree stamped as a newer version, then rolls it back to the
// release it was installed from. After each move every platform Deployment
// runs the target's digests and is Available, no plugin pod was touched,
// the core calls every plugin again, nothing it stored shrank or grew
// without a batch, and each old egress proxy pod shut down on SIGTERM
// within its grace (closing a tunnel only once the grace ran out).
//
// The plugins are uninstalled when the phase ends, passed or failed.
//
// Syncs reach the NBP stand-in through the proxy (the cluster DNS answers
// its name with the stand-in's address), so an old proxy pod may hold
// tunnels when it stops: the log check below counts those that ended during
// its shutdown and fails on any closed before the grace ran out.
func testUpgradeRollback(t *testing.T, e *platformEnv) {
	ctx := context.Background()
	ref := e.preg.publishNBPFx(t, e.root, e.signer, e.nbp.CAPEM())
	t.Cleanup(func() { uninstallPlugins(t, e, upgradeInstances) })
	for _, name := range upgradeInstances {
		openfief(t, e.kubeconfig, "plugin", "install", name, "--image", ref.String(), "--signers", e.signersFile, "--insecure-registry", e.preg.bridge)
		openfief(t, e.kubeconfig, "plugin", "approve", name, "--yes")
	}
	before := map[string]pluginState{}
	calls := map[string]coreStatus{}
	for _, name := range upgradeInstances {
		runningPluginPod(t, e.cs, name)
		before[name] = readPluginState(t, e, name)
		// The core has called it at least once: the calls to follow.
		calls[name] = waitCalled(t, e, name, time.Time{})
	}

	// The same tree as a newer version: other digests, the same programs,
	// the same isolation gate and its settings (OF-42).
	nextOverlay, nextTag, nextRefs := restampedRelease(t, e, "upgrade-test")

	moves := []struct {
		name    string
		overlay string
		version string
		refs    map[string]plugins.ImageRef
		args    []string
	}{
		{"upgrade", nextOverlay, nextTag, nextRefs, nil},
		{"rollback", e.overlay, e.src.Tag(), e.refs, []string{"--allow-downgrade"}},
	}
	for _, m := range moves {
		if m.name == "rollback" {
			// Without the flag an older release is refused, and nothing
			// changes.
			code, out := e.cli(ctx, "platform", "upgrade", "--overlay", m.overlay, "--timeout", "1m")
			if code != cli.ExitInvalid || !strings.Contains(out, "refusing a downgrade") {
				t.Errorf("platform upgrade to the older %s without --allow-downgrade: exit %d, want %d refusing a downgrade\n%s", m.version, code, cli.ExitInvalid, out)
			}
			checkPlatformAt(t, e, nextRefs, nextTag)
		}
		start := time.Now()
		old := platformPods(t, e)
		proxyLogs := followProxyLogs(t, e)
		args := append([]string{"platform", "upgrade", "--overlay", m.overlay, "--timeout", "4m"}, m.args...)
		code, out := e.cli(ctx, args...)
		t.Logf("openfief %s: exit %d in %s\n%s", strings.Join(args, " "), code, time.Since(start).Round(100*time.Millisecond), out)
		if code != cli.ExitOK {
			t.Fatalf("%s: openfief platform upgrade exited %d", m.name, code)
		}
		done := time.Now()
		waitPlatformRolled(t, e, m.refs, m.version, old)
		checkProxyShutdown(t, m.name, proxyLogs.wait(t, proxyTermination+30*time.Second))
		for _, name := range upgradeInstances {
			now := waitCalled(t, e, name, done)
			checkStored(t, name, calls[name], now)
			calls[name] = now
			// Checked once the new core has called it: by then the new
			// operator has led and reconciled every plugin for a while.
			checkPluginUntouched(t, name, before[name], readPluginState(t, e, name))
		}
		t.Logf("%s to %s: the platform rolled in %s, every plugin kept its pod and was called again",
			m.name, m.version, time.Since(start).Round(100*time.Millisecond))
	}
}

// platformPods are the UIDs of every pod of the platform's Deployments.
func platformPods(t *testing.T, e *platformEnv) map[types.UID]string {
	t.Helper()
	out := map[types.UID]string{}
	for name := range platformDeployments {
		for _, p := range listPods(t, e, "app.kubernetes.io/name="+name) {
			out[p.UID] = p.Name
		}
	}
	return out
}

func listPods(t *testing.T, e *platformEnv, selector string) []corev1.Pod {
	t.Helper()
	pods, err := e.cs.CoreV1().Pods(plugins.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	must(t, err)
	return pods.Items
}

// checkPlatformAt checks that every platform Deployment is labelled with
// version and its pod template runs refs.
func checkPlatformAt(t *testing.T, e *platformEnv, refs map[string]plugins.ImageRef, version string) {
	t.Helper()
	for name, image := range platformDeployments {
		d, err := e.cs.AppsV1().Deployments(plugins.Namespace).Get(context.Background(), name, metav1.GetOptions{})
		must(t, err)
		if why := deploymentNotAt(d, refs[image].String(), version); why != "" {
			t.Errorf("%s: %s", name, why)
		}
	}
}

// deploymentNotAt says how d differs from running image at version, or "".
func deploymentNotAt(d *appsv1.Deployment, image, version string) string {
	switch {
	case d.Labels[platform.LabelVersion] != version:
		return fmt.Sprintf("version %q, want %q", d.Labels[platform.LabelVersion], version)
	case d.Spec.Template.Spec.Containers[0].Image != image:
		return fmt.Sprintf("image %s, want %s", d.Spec.Template.Spec.Containers[0].Image, image)
	}
	return ""
}

// waitPlatformRolled waits until every platform Deployment is at version,
// Available with every replica updated and ready, and its pods are new
// ones (none of old) running refs' image as containers that never
// restarted.
func waitPlatformRolled(t *testing.T, e *platformEnv, refs map[string]plugins.ImageRef, version string, old map[types.UID]string) {
	t.Helper()
	ctx := context.Background()
	testutil.Eventually(t, 2*time.Minute, "every platform Deployment rolled to "+version, func() (bool, string) {
		for name, image := range platformDeployments {
			want := refs[image].String()
			d, err := e.cs.AppsV1().Deployments(plugins.Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if why := deploymentNotAt(d, want, version); why != "" {
				return false, name + ": " + why
			}
			r := *d.Spec.Replicas
			if !platform.DeploymentAvailable(d) || d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != r || d.Status.ReadyReplicas != r || d.Status.Replicas != r {
				return false, fmt.Sprintf("%s: %d updated, %d ready, %d in all of %d", name, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.Replicas, r)
			}
			pods := listPods(t, e, metav1.FormatLabelSelector(d.Spec.Selector))
			if len(pods) != int(r) {
				return false, fmt.Sprintf("%s: %d pods, want %d", name, len(pods), r)
			}
			for _, p := range pods {
				if _, ok := old[p.UID]; ok {
					return false, fmt.Sprintf("%s: pod %s of before the move is still there", name, p.Name)
				}
				if p.Spec.Containers[0].Image != want {
					return false, fmt.Sprintf("%s: pod %s runs %s", name, p.Name, p.Spec.Containers[0].Image)
				}
				for _, st := range p.Status.ContainerStatuses {
					if st.State.Running == nil || !st.Ready || st.RestartCount != 0 {
						return false, fmt.Sprintf("%s: pod %s container %s ready=%v restarts=%d %+v", name, p.Name, st.Name, st.Ready, st.RestartCount, st.State)
					}
				}
			}
		}
		return true, ""
	})
}

// pluginState is what a plugin's workload is made of, which a platform
// upgrade must leave as it was.
type pluginState struct {
	pod         types.UID
	podName     string
	containerID string
	restarts    int32
	deployment  types.UID
	generation  int64
	replicaSets []string // name/UID, sorted
}

// readPluginState reads the plugin's one pod, its Deployment and their
// ReplicaSets.
func readPluginState(t *testing.T, e *platformEnv, name string) pluginState {
	t.Helper()
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: plugins.LabelPluginName + "=" + name}
	var s pluginState
	pods := listPods(t, e, sel.LabelSelector)
	if len(pods) != 1 || len(pods[0].Status.ContainerStatuses) != 1 {
		t.Fatalf("plugin %s: %d pods, want 1 with one container", name, len(pods))
	}
	st := pods[0].Status.ContainerStatuses[0]
	s.pod, s.podName, s.containerID, s.restarts = pods[0].UID, pods[0].Name, st.ContainerID, st.RestartCount
	ds, err := e.cs.AppsV1().Deployments(plugins.Namespace).List(ctx, sel)
	must(t, err)
	if len(ds.Items) != 1 {
		t.Fatalf("plugin %s: %d Deployments, want 1", name, len(ds.Items))
	}
	s.deployment, s.generation = ds.Items[0].UID, ds.Items[0].Generation
	rss, err := e.cs.AppsV1().ReplicaSets(plugins.Namespace).List(ctx, sel)
	must(t, err)
	for _, rs := range rss.Items {
		s.replicaSets = append(s.replicaSets, rs.Name+"/"+string(rs.UID))
	}
	slices.Sort(s.replicaSets)
	return s
}

// checkPluginUntouched fails when the plugin's workload changed between
// before and after: another pod or container, a restart, another
// Deployment or a new revision of it.
func checkPluginUntouched(t *testing.T, name string, before, after pluginState) {
	t.Helper()
	if after.pod != before.pod || after.containerID != before.containerID {
		t.Errorf("plugin %s: pod %s (%s) replaced by %s (%s)", name, before.podName, before.containerID, after.podName, after.containerID)
	}
	if after.restarts != 0 {
		t.Errorf("plugin %s: pod %s restarted %d times", name, after.podName, after.restarts)
	}
	if after.deployment != before.deployment || after.generation != before.generation {
		t.Errorf("plugin %s: Deployment %s generation %d became %s generation %d", name, before.deployment, before.generation, after.deployment, after.generation)
	}
	if !slices.Equal(after.replicaSets, before.replicaSets) {
		t.Errorf("plugin %s: ReplicaSets %v became %v", name, before.replicaSets, after.replicaSets)
	}
}

// waitCalled waits until the core has synced the instance successfully at
// or after since, which the status records to the second; it returns the
// status then.
func waitCalled(t *testing.T, e *platformEnv, name string, since time.Time) coreStatus {
	t.Helper()
	since = since.Truncate(time.Second)
	return waitCoreStatus(t, e, name, 2*time.Minute, "the core to sync "+name+" after "+since.Format(time.RFC3339), func(s coreStatus) bool {
		return s.called && s.succeeded && !s.lastSync.Before(since)
	})
}

// checkStored fails when what the core stored for the instance shrank,
// changed without a new batch, or holds other than the stand-in's two
// rates (a batch stored twice would add rows to one already counted).
func checkStored(t *testing.T, name string, before, after coreStatus) {
	t.Helper()
	for i := range before.counts {
		if after.counts[i] < before.counts[i] {
			t.Errorf("plugin %s: the core's rows went from %v to %v", name, before.counts, after.counts)
			return
		}
	}
	if after.counts[1] == before.counts[1] && after.counts != before.counts {
		t.Errorf("plugin %s: rows went from %v to %v without a new batch", name, before.counts, after.counts)
	}
	if after.fxRates != 2 {
		t.Errorf("plugin %s holds %d FX rates, want the stand-in's 2: %s", name, after.fxRates, after.summary)
	}
	t.Logf("plugin %s: %s", name, after.summary)
}

// proxyLogs follows the logs of the egress proxy pods running when it
// began, each until its container ends.
type proxyLogs struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	pods map[string]*podLog
}

type podLog struct {
	lines []string
	ended time.Time
	err   error
}

func followProxyLogs(t *testing.T, e *platformEnv) *proxyLogs {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	l := &proxyLogs{pods: map[string]*podLog{}}
	for _, p := range listPods(t, e, "app.kubernetes.io/name=openfief-egress-proxy") {
		pl := &podLog{}
		l.pods[p.Name] = pl
		stream, err := e.cs.CoreV1().Pods(plugins.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Follow: true}).Stream(ctx)
		if err != nil {
			pl.err = err
			continue
		}
		l.wg.Go(func() {
			defer stream.Close()
			sc := bufio.NewScanner(stream)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			var lines []string
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			pl.lines, pl.ended, pl.err = lines, time.Now(), sc.Err()
		})
	}
	if len(l.pods) == 0 {
		t.Fatal("no egress proxy pod to follow")
	}
	return l
}

// wait returns each pod's log once every stream ended, or fails after
// timeout.
func (l *proxyLogs) wait(t *testing.T, timeout time.Duration) map[string]*podLog {
	t.Helper()
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		t.Fatalf("the logs of the old egress proxy pods did not end within %s of the rollout: is one still running?", timeout)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pods
}

// proxyLogEntry is the part of a proxy log line (slog JSON) the checks read.
type proxyLogEntry struct {
	Time     time.Time `json:"time"`
	Msg      string    `json:"msg"`
	Grace    int64     `json:"grace"` // nanoseconds
	Decision string    `json:"decision"`
	Reason   string    `json:"reason"`
	Plugin   string    `json:"plugin"`
	Target   string    `json:"target"`
}

// checkProxyShutdown reads the logs of the proxy pods a move replaced:
// each got SIGTERM and said so with its grace, its log ended (the process
// exited) before the kubelet would have killed it, and a tunnel closed by
// the shutdown closed only once the grace ran out.
func checkProxyShutdown(t *testing.T, move string, logs map[string]*podLog) {
	t.Helper()
	for pod, pl := range logs {
		if pl.err != nil {
			t.Errorf("%s: the log of egress proxy pod %s: %v", move, pod, pl.err)
			continue
		}
		var stop *proxyLogEntry
		closed, byGrace := 0, 0
		for _, line := range pl.lines {
			var en proxyLogEntry
			if json.Unmarshal([]byte(line), &en) != nil {
				continue
			}
			switch {
			case en.Msg == "shutting down":
				stop = &en
			case en.Msg == "egress" && en.Decision == "allow" && stop != nil:
				closed++
				if en.Reason == "shutdown" {
					byGrace++
					if en.Time.Before(stop.Time.Add(proxyGrace - time.Second)) {
						t.Errorf("%s: egress proxy pod %s closed %s's tunnel to %s %s after SIGTERM, before its grace of %s ran out",
							move, pod, en.Plugin, en.Target, en.Time.Sub(stop.Time).Round(time.Millisecond), proxyGrace)
					}
				}
			}
		}
		if stop == nil {
			t.Errorf("%s: egress proxy pod %s never logged its shutdown (killed?); its last lines: %s", move, pod, strings.Join(lastN(pl.lines, 3), " | "))
			continue
		}
		if time.Duration(stop.Grace) != proxyGrace {
			t.Errorf("%s: egress proxy pod %s shut down with a grace of %s, want %s", move, pod, time.Duration(stop.Grace), proxyGrace)
		}
		// The stream ends when the container does; a proxy still running at
		// the end of the termination grace period is killed.
		if lived := pl.ended.Sub(stop.Time); lived > proxyTermination-2*time.Second {
			t.Errorf("%s: egress proxy pod %s ran %s after SIGTERM, near or past its termination grace period of %s", move, pod, lived.Round(100*time.Millisecond), proxyTermination)
		}
		t.Logf("%s: egress proxy pod %s shut down (grace %s) and exited about %s later; %d tunnels ended during the shutdown, %d closed by the end of the grace",
			move, pod, proxyGrace, pl.ended.Sub(stop.Time).Round(100*time.Millisecond), closed, byGrace)
	}
}

func lastN(lines []string, n int) []string {
	return lines[max(len(lines)-n, 0):]
}

// uninstallPlugins uninstalls each plugin that is still there, with its
// grant: a phase leaves no plugin behind, even when it failed half-way.
func uninstallPlugins(t *testing.T, e *platformEnv, names []string) {
	for _, name := range names {
		code, out := e.cli(context.Background(), "plugin", "uninstall", name, "--yes", "--purge", "--wait", "60s")
		switch code {
		case cli.ExitOK:
			t.Logf("uninstalled plugin %s", name)
		case cli.ExitNotFound:
		default:
			t.Errorf("openfief plugin uninstall %s exited %d\n%s", name, code, out)
		}
	}
}

// siteOperatorArgs is what the admin's overlay gives the installed
// operator, as its Deployment holds it: --isolation-gate-targets and
// --isolation-gate-deadline (OF-42: the gate's arguments are in every
// plugin's pod) and --registry-retry.
func siteOperatorArgs(t *testing.T, e *platformEnv) []string {
	t.Helper()
	d, err := e.cs.AppsV1().Deployments(plugins.Namespace).Get(context.Background(), "openfief-operator", metav1.GetOptions{})
	must(t, err)
	var out []string
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--isolation-gate-targets=") || strings.HasPrefix(a, "--isolation-gate-deadline=") || strings.HasPrefix(a, "--registry-retry=") {
			out = append(out, a)
		}
	}
	return out
}
