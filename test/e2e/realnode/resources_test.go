//go:build cluster

package realnode

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// hogInstance is the plugin the resource tests run: the probe as /plugin,
// a connector asking for nothing, so it gets the default resources.
const hogInstance = "res-hog"

// TestPluginResourcesOnRealNode runs a plugin that takes what it can, on
// the real node under the operator's pod (defaults: 128Mi of memory plus a
// 64Mi /tmp in memory, 500m of CPU, the kubelet's podPidsLimit), and checks
// that the kernel stops it at each bound while the core keeps answering:
// its ids are not 0; filling /tmp stops at 64 MiB with ENOSPC and no disk
// pressure on the node; a fork bomb stops below PodPidsLimit; a CPU spinner
// leaves the core's owner API answering within a bound; a memory hog is
// OOM-killed alone (the plugin's container keeps running, restart count 0;
// the core and the proxy answer).
func TestPluginResourcesOnRealNode(t *testing.T) {
	stack, _ := platform(t)
	// Beside the package's other parallel tests (main_test.go says which).
	t.Parallel()
	ctx := t.Context()
	ref, err := stack.PublishImage(ctx, "plugins/res-hog", plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}},
		map[string][]byte{"plugin": buildStatic(t, "./internal/devcluster/testdata/probe")})
	if err != nil {
		t.Fatal(err)
	}
	openfief(t, stack, "plugin", "install", hogInstance, "--image", ref.String(), "--signers", stack.SignersFile)
	openfief(t, stack, "plugin", "approve", hogInstance, "--yes")
	cs, err := kubernetes.NewForConfig(stack.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	pod := runningPod(t, cs, hogInstance)
	token := testutil.OwnerToken(t, cs, plugins.Namespace)
	idle := ownerLatency(t, stack.CoreURL, token, 20)
	t.Logf("core's owner API, idle: slowest of 20 %v", idle)

	t.Run("ids", func(t *testing.T) {
		out := strings.TrimSpace(execIn(t, stack, cs, pod.Name, "/plugin", "ids"))
		if out != "uid=65532 gid=65532 groups=[65532]" {
			t.Errorf("the plugin runs as %q, want uid=65532 gid=65532 groups=[65532] (never group 0)", out)
		}
	})

	t.Run("tmp", func(t *testing.T) {
		out := strings.TrimSpace(execIn(t, stack, cs, pod.Name, "/plugin", "fill", "/tmp"))
		m := regexp.MustCompile(`^wrote (\d+) MiB: .*no space left on device$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("filling /tmp: %q, want it to stop with ENOSPC", out)
		}
		if mib, _ := strconv.Atoi(m[1]); mib < 60 || mib > 64 {
			t.Errorf("/tmp took %d MiB, want about 64", mib)
		}
		node, err := cs.CoreV1().Nodes().Get(t.Context(), devcluster.RealNodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeDiskPressure && c.Status != corev1.ConditionFalse {
				t.Errorf("node DiskPressure %s: %s", c.Status, c.Message)
			}
		}
		t.Logf("fill /tmp: %s", out)
	})

	t.Run("fork", func(t *testing.T) {
		out := strings.TrimSpace(execIn(t, stack, cs, pod.Name, "/plugin", "fork", "100000"))
		m := regexp.MustCompile(`^started (\d+): (.*)$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("fork bomb: %q, want it stopped", out)
		}
		if n, _ := strconv.Atoi(m[1]); n >= devcluster.PodPidsLimit || !strings.Contains(m[2], "resource temporarily unavailable") {
			t.Errorf("fork bomb: %q, want fewer than %d processes and EAGAIN", out, devcluster.PodPidsLimit)
		}
		t.Logf("fork bomb: %s (each process a Go program of several threads; the limit counts threads)", out)
	})

	t.Run("cpu", func(t *testing.T) {
		done := make(chan string, 1)
		go func() { done <- execIn(t, stack, cs, pod.Name, "/plugin", "spin", "10") }()
		time.Sleep(2 * time.Second)
		busy := ownerLatency(t, stack.CoreURL, token, 20)
		t.Logf("core's owner API while the plugin spins every CPU: slowest of 20 %v (idle %v)", busy, idle)
		if busy > time.Second {
			t.Errorf("the owner API took %v while a plugin spun, want under 1s", busy)
		}
		if out := strings.TrimSpace(<-done); out != "spun" {
			t.Errorf("spinner: %q", out)
		}
	})

	t.Run("memory", func(t *testing.T) {
		out := execIn(t, stack, cs, pod.Name, "/plugin", "alloc")
		if !strings.Contains(out, "137") {
			t.Errorf("the memory hog ended with %q, want killed (exit code 137)", out)
		}
		after := runningPod(t, cs, hogInstance)
		if after.UID != pod.UID {
			t.Errorf("the plugin's pod was replaced")
		}
		for _, s := range after.Status.ContainerStatuses {
			if s.RestartCount != 0 {
				t.Errorf("container %s restarted %d times; only the hog should have been killed", s.Name, s.RestartCount)
			}
		}
		t.Logf("core's owner API after the OOM kill: slowest of 5 %v", ownerLatency(t, stack.CoreURL, token, 5))
		c, err := net.DialTimeout("tcp", stack.ProxyAddress, 2*time.Second)
		if err != nil {
			t.Errorf("the egress proxy does not answer after the OOM kill: %v", err)
		} else {
			_ = c.Close()
		}
	})
}

// ownerLatency asks the core's owner API for hogInstance's status n times
// and returns the slowest answer, failing on any that is not 200.
func ownerLatency(t *testing.T, coreURL, token string, n int) time.Duration {
	t.Helper()
	var times []time.Duration
	for range n {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, coreURL+ownerapi.StatusPath(hogInstance), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(ownerapi.HeaderOwnerToken, token)
		start := time.Now()
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("owner API: %v", err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		_ = resp.Body.Close()
		times = append(times, time.Since(start))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("owner API: %s", fmt.Sprint(resp.Status))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return slices.Max(times)
}
