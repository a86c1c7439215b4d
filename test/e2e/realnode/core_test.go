//go:build cluster

package realnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/devstack"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// coreInstance is TestCoreSyncsPodOnRealNode's plugin, which the core syncs
// every coreInterval (main_test.go).
const (
	coreInstance = "nbp-core"
	coreInterval = 2 * time.Second
)

// TestCoreSyncsPodOnRealNode: nbp-fx installed and approved runs as the
// operator's pod on the real node; the platform's own core, not the test,
// calls its Sync on schedule through the plugin's Service (its ClusterIP,
// which the core resolves from the API: the node has no cluster DNS), and
// the plugin reaches the NBP stand-in only through the egress proxy's
// Service. The rows are stored; later syncs carry the watermark and store
// nothing twice; `openfief plugin status` shows it; after the revocation
// the pod goes and nothing calls NBP any more.
func TestCoreSyncsPodOnRealNode(t *testing.T) {
	stack, nbp := platform(t)
	// Beside the package's other parallel tests (main_test.go says which).
	t.Parallel()
	cs, err := kubernetes.NewForConfig(stack.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	ref := publishNBPFx(t, stack, nbp)
	before := nbp.Requests.Load()
	openfief(t, stack, "plugin", "install", coreInstance, "--image", ref, "--signers", stack.SignersFile)
	openfief(t, stack, "plugin", "approve", coreInstance, "--yes")
	pod := runningPod(t, cs, coreInstance)
	t.Logf("plugin pod %s (%s) Running", pod.Name, pod.Status.PodIP)

	start := time.Now()
	testutil.Eventually(t, 2*time.Minute, "the core to store nbp-fx's rates", func() (bool, string) {
		st := coreStatus(t, stack, coreInstance)
		return st.Scheduled && st.LastOK && st.Rows.FxRates >= 2 && st.Watermark != "", fmt.Sprintf("%+v", st)
	})
	first := coreStatus(t, stack, coreInstance)
	t.Logf("first sync stored %d FX rates (watermark %q) %v after the pod ran; NBP stand-in asked %d times",
		first.Rows.FxRates, first.Watermark, time.Since(start).Round(time.Millisecond), nbp.Requests.Load()-before)
	if nbp.Requests.Load() == before {
		t.Error("the plugin did not reach the NBP stand-in")
	}

	// Later syncs carry the stored watermark; the stand-in answers the same
	// table, so nothing is stored twice.
	testutil.Eventually(t, time.Minute, "two more syncs", func() (bool, string) {
		st := coreStatus(t, stack, coreInstance)
		return st.LastOK && st.Rows.Batches >= first.Rows.Batches+2, fmt.Sprintf("%+v", st)
	})
	again := coreStatus(t, stack, coreInstance)
	if again.Rows.FxRates != first.Rows.FxRates || again.RowsTotal != first.RowsTotal || again.Watermark != first.Watermark {
		t.Errorf("after more syncs %d rates (%d rows), watermark %q; want %d (%d) and %q: stored twice",
			again.Rows.FxRates, again.RowsTotal, again.Watermark, first.Rows.FxRates, first.RowsTotal, first.Watermark)
	}
	out := openfief(t, stack, "plugin", "status", coreInstance, "--core-url", stack.CoreURL)
	for _, want := range []string{"Last sync:", "succeeded", "Next sync:", fmt.Sprintf("FX rates %d", again.Rows.FxRates)} {
		if !strings.Contains(out, want) {
			t.Errorf("plugin status lacks %q", want)
		}
	}

	// Revoking the grant stops the calls and the pod.
	openfief(t, stack, "plugin", "revoke", coreInstance, "--yes")
	testutil.Eventually(t, time.Minute, "the core to stop calling", func() (bool, string) {
		st := coreStatus(t, stack, coreInstance)
		return !st.Scheduled, fmt.Sprintf("%+v", st)
	})
	podGone(t, cs, coreInstance)
	stopped := coreStatus(t, stack, coreInstance)
	calls := nbp.Requests.Load()
	time.Sleep(3 * coreInterval)
	if st := coreStatus(t, stack, coreInstance); st.Rows.Batches != stopped.Rows.Batches || st.LastSync == nil || !st.LastSync.Equal(*stopped.LastSync) {
		t.Errorf("after the revocation: %+v, was %+v", st, stopped)
	}
	if n := nbp.Requests.Load(); n != calls {
		t.Errorf("the NBP stand-in was asked %d more times after the revocation", n-calls)
	}
	openfief(t, stack, "plugin", "uninstall", coreInstance, "--yes", "--purge", "--wait", "60s")
}

// coreStatus reads the core's status of instance from its owner API.
func coreStatus(t *testing.T, stack *devstack.Stack, instance string) ownerapi.InstanceStatus {
	t.Helper()
	cs, err := stack.Cluster.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	return testutil.CoreStatus(t, cs, plugins.Namespace, stack.CoreURL, instance)
}

// podGone waits until plugin has no pod.
func podGone(t *testing.T, cs kubernetes.Interface, plugin string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(plugins.Namespace).List(ctx, metav1.ListOptions{LabelSelector: plugins.LabelPluginName + "=" + plugin})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("%d pods", len(pods.Items))
		return len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("plugin %s's pod not gone: %v (%s)", plugin, err, last)
	}
}
