//go:build cluster

package incluster

import (
	"context"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/devcluster"
)

// testResourceBounds is OF-45's proof with the platform as pods: a plugin
// that takes what it can (the probe's resource modes, run by exec in its
// container, so in its cgroup) is stopped at each bound, while the core and
// the egress proxy, pods of the same node, keep answering and never
// restart. The owner API is measured through the API server's service
// proxy, as `openfief plugin status` reaches it, idle and while the plugin
// spins every CPU.
func testResourceBounds(t *testing.T, e *platformEnv) {
	ctx := context.Background()
	const name = "hog"
	m := nbpFxManifest(t, e.root)
	ref := e.preg.publish(t, "plugins/hog", m, map[string][]byte{"plugin": e.probeBinary(t)}, e.signer)
	openfief(t, e.kubeconfig, "plugin", "install", name, "--image", ref.String(), "--signers", e.signersFile, "--insecure-registry", e.preg.bridge)
	uninstallOnFailure(t, e, name)
	openfief(t, e.kubeconfig, "plugin", "approve", name, "--yes")
	pod := runningPluginPod(t, e.cs, name)
	before := platformRestarts(t, e)
	status := func() time.Duration {
		start := time.Now()
		if code, out := e.cli(ctx, "plugin", "status", name); code != cli.ExitOK {
			t.Errorf("openfief plugin status %s: exit %d\n%s", name, code, out)
		}
		return time.Since(start)
	}
	slowest := func(n int) time.Duration {
		var d []time.Duration
		for range n {
			d = append(d, status())
		}
		return slices.Max(d)
	}
	idle := slowest(10)

	if out := strings.TrimSpace(execIn(t, e.c, e.cs, pod, "/plugin", "ids")); out != "uid=65532 gid=65532 groups=[65532]" {
		t.Errorf("the plugin runs as %q, want uid=65532 gid=65532 groups=[65532]", out)
	}

	out := strings.TrimSpace(execIn(t, e.c, e.cs, pod, "/plugin", "fill", "/tmp"))
	if !regexp.MustCompile(`^wrote (6[0-4]) MiB: .*no space left on device$`).MatchString(out) {
		t.Errorf("filling /tmp: %q, want it stopped at about 64 MiB with ENOSPC", out)
	}
	t.Logf("/tmp filler: %s", out)

	out = strings.TrimSpace(execIn(t, e.c, e.cs, pod, "/plugin", "fork", "100000"))
	fm := regexp.MustCompile(`^started (\d+): (.*)$`).FindStringSubmatch(out)
	if fm == nil || !strings.Contains(fm[2], "resource temporarily unavailable") {
		t.Errorf("fork bomb: %q, want it stopped with EAGAIN", out)
	} else if n, _ := strconv.Atoi(fm[1]); n >= devcluster.PodPidsLimit {
		t.Errorf("fork bomb started %d processes, the node's limit is %d", n, devcluster.PodPidsLimit)
	}
	t.Logf("fork bomb: %s", out)

	spun := make(chan string, 1)
	go func() { spun <- strings.TrimSpace(execIn(t, e.c, e.cs, pod, "/plugin", "spin", "10")) }()
	time.Sleep(2 * time.Second)
	busy := slowest(10)
	if s := <-spun; s != "spun" {
		t.Errorf("the spinner said %q", s)
	}
	t.Logf("openfief plugin status (through the API server to the core's pod): slowest of 10 idle %v, while the plugin spins every CPU %v (%.2fx)",
		idle.Round(time.Millisecond), busy.Round(time.Millisecond), float64(busy)/float64(idle))
	if busy > 5*time.Second {
		t.Errorf("the owner API took %v while a plugin spun, want under 5 s", busy)
	}

	out = execIn(t, e.c, e.cs, pod, "/plugin", "alloc")
	if !strings.Contains(out, "137") {
		t.Errorf("the memory hog ended with %q, want it killed (exit code 137)", out)
	}
	if d := slowest(3); d > 5*time.Second {
		t.Errorf("the owner API took %v after the OOM kill", d)
	}
	after := runningPluginPod(t, e.cs, name)
	if after.UID != pod.UID || after.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the plugin's container restarted or its pod was replaced: only the hog's process should die")
	}
	if got := platformRestarts(t, e); !maps.Equal(got, before) {
		t.Errorf("the platform's containers restarted: before %v, after %v", before, got)
	}
	node, err := e.cs.CoreV1().Nodes().Get(ctx, devcluster.RealNodeName, metav1.GetOptions{})
	must(t, err)
	for _, c := range node.Status.Conditions {
		if (c.Type == corev1.NodeDiskPressure || c.Type == corev1.NodeMemoryPressure || c.Type == corev1.NodePIDPressure) && c.Status != corev1.ConditionFalse {
			t.Errorf("node %s %s: %s", c.Type, c.Status, c.Message)
		}
	}
	openfief(t, e.kubeconfig, "plugin", "uninstall", name, "--yes", "--wait", "60s")
}

// platformRestarts is the restart count of every container of the
// platform's pods (operator, egress proxy, core), by pod and container.
func platformRestarts(t *testing.T, e *platformEnv) map[string]int32 {
	t.Helper()
	out := map[string]int32{}
	for dep := range platformDeployments {
		for _, p := range listPods(t, e, "app.kubernetes.io/name="+dep) {
			for _, s := range p.Status.ContainerStatuses {
				out[p.Name+"/"+s.Name] = s.RestartCount
			}
		}
	}
	return out
}
