//go:build cluster

package realnode

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/arkadiuss/openfief/internal/devstack"
	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// tsInstance is TestTypeScriptConnectorOnRealNode's plugin, which the core
// syncs every coreInterval (main_test.go).
const tsInstance = "fx-ts"

// TestTypeScriptConnectorOnRealNode runs the TypeScript SDK's example
// connector (sdk/ts/examples/fx-rates) as the operator's pod on the real
// node, from the image internal/images builds for it (Debian's Node.js
// and the compiled example, images.NodeRuntime and images.TSPluginApp),
// signed by the owner, its CA bundle trusting the bank stand-in
// (devstack.FakeBank, at a stand-in address of the node's bridge). The
// platform's core syncs it on schedule: the bank's rates are stored, and a
// later sync stores nothing twice. A Sync with a token for another
// instance is refused Unauthenticated by the plugin's own check, while one
// for its own instance is served. The bank is reachable only through the
// egress proxy: from inside the plugin's container (Node.js run by exec) a
// direct connection to the bank's address is refused, while the node
// connects to it.
func TestTypeScriptConnectorOnRealNode(t *testing.T) {
	stack, _ := platform(t)
	// Beside the package's other parallel tests (main_test.go says which).
	t.Parallel()
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(stack.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	bank := startBank(t, stack)

	// The example's image, for this machine, signed by the owner.
	src, err := images.ReadSource(ctx, repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	built := time.Now()
	arch := images.HostPlatform().Architecture
	idx, err := images.BuildTSExample(ctx, src, []string{arch}, bank.CAPEM())
	if err != nil {
		t.Fatal(err)
	}
	img := hostImage(t, idx)
	ref, err := stack.PublishBuiltImage(ctx, "plugins/fx-rates-ts", img)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built and published %s in %v", ref, time.Since(built).Round(time.Millisecond))

	config := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(config, []byte(`{"host":"`+devstack.FakeBankHost+`","quote":"PLN"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	before := bank.Requests.Load()
	openfief(t, stack, "plugin", "install", tsInstance, "--image", ref.String(), "--config", config, "--signers", stack.SignersFile)
	openfief(t, stack, "plugin", "approve", tsInstance, "--yes")
	pod := runningPod(t, cs, tsInstance)
	if id := pod.Status.ContainerStatuses[0].ContainerID; !strings.HasPrefix(id, "containerd://") {
		t.Errorf("the plugin's pod %s runs no container of the node: %q", pod.Name, id)
	}
	t.Logf("plugin pod %s (%s) Running", pod.Name, pod.Status.PodIP)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the plugin's log:\n%s", podLog(cs, pod.Name))
		}
	})

	// The core's scheduled syncs store the bank's rates, once.
	want := len(devstack.FakeBankRates)
	testutil.Eventually(t, 2*time.Minute, "the core to store the TypeScript connector's rates", func() (bool, string) {
		st := coreStatus(t, stack, tsInstance)
		return st.Scheduled && st.LastOK && st.Rows.FxRates == want && st.Watermark != "", fmt.Sprintf("%+v", st)
	})
	first := coreStatus(t, stack, tsInstance)
	testutil.Eventually(t, time.Minute, "two more syncs", func() (bool, string) {
		st := coreStatus(t, stack, tsInstance)
		return st.LastOK && st.Rows.Batches >= first.Rows.Batches+2, fmt.Sprintf("%+v", st)
	})
	again := coreStatus(t, stack, tsInstance)
	if again.Rows.FxRates != want || again.Watermark != first.Watermark {
		t.Errorf("after more syncs %d rates, watermark %q; want %d and %q", again.Rows.FxRates, again.Watermark, want, first.Watermark)
	}
	last := devstack.FakeBankRates[len(devstack.FakeBankRates)-1].Date
	if first.Watermark != last {
		t.Errorf("watermark %q, want the last rate's date %s", first.Watermark, last)
	}
	if bank.Requests.Load() == before {
		t.Error("the bank stand-in received no request, yet rates were stored")
	}
	t.Logf("the core stored %d rates in %d batches, watermark %s; the bank answered %d requests",
		again.Rows.FxRates, again.Rows.Batches, again.Watermark, bank.Requests.Load()-before)

	// The plugin's own check: a token the API server issued to the core,
	// for another instance, is refused.
	svc, err := cs.CoreV1().Services(plugins.Namespace).Get(ctx, plugins.ServiceAccountName(tsInstance), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(svc.Spec.Ports[0].Port))
	client := connectorv1connect.NewConnectorServiceClient(&http.Client{Timeout: 30 * time.Second}, base)
	for _, c := range []struct {
		name, audience string
		want           connect.Code
	}{
		{"another instance's token", "openfief-plugin:fx-ts-other", connect.CodeUnauthenticated},
		{"its own token (the control)", "openfief-plugin:" + tsInstance, 0},
	} {
		req := connect.NewRequest(&connectorv1.SyncRequest{BatchId: "ts-direct-" + fmt.Sprint(c.want)})
		req.Header().Set("Authorization", "Bearer "+requestToken(t, cs, devstack.CoreServiceAccount, c.audience))
		_, err := client.Sync(ctx, req)
		if got := connect.CodeOf(err); err != nil && got != c.want || err == nil && c.want != 0 {
			t.Errorf("Sync with %s: %v, want code %v", c.name, err, c.want)
		} else {
			t.Logf("Sync with %s: %v", c.name, errOrOK(err))
		}
	}

	// Only through the proxy: from inside the plugin's own container (its
	// image has no shell, but it has Node.js), a direct connection to the
	// bank's address is refused, while the node, the control, connects.
	direct := bank.Addr()
	var fromPlugin, control string
	testutil.Eventually(t, 30*time.Second, "a direct connection from the plugin refused", func() (bool, string) {
		fromPlugin = strings.TrimSpace(execIn(t, stack, cs, pod.Name, "/usr/bin/node", "-e", nodeDial(direct)))
		control = fromNode("connect", direct)
		return fromPlugin == "refused" && control == "open", fmt.Sprintf("from the plugin %q, from the node %q", fromPlugin, control)
	})
	t.Logf("direct to the bank at %s: from the plugin's container %s, from the node %s", direct, fromPlugin, control)

	openfief(t, stack, "plugin", "uninstall", tsInstance, "--yes", "--purge", "--purge-data", "--core-url", stack.CoreURL, "--wait", "60s")
	podGone(t, cs, tsInstance)
}

// startBank serves the bank stand-in on port 443 of a new stand-in address
// of the node's bridge, and makes the proxy's resolver answer its name
// with that address.
func startBank(t *testing.T, stack *devstack.Stack) *devstack.FakeBank {
	t.Helper()
	addr, err := stack.Cluster.StandInAddress()
	if err != nil {
		t.Fatal(err)
	}
	bank, err := devstack.StartFakeBank(net.JoinHostPort(addr.String(), "443"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bank.Close)
	shared.resolver.set(devstack.FakeBankHost, addr)
	t.Cleanup(func() { shared.resolver.set(devstack.FakeBankHost, netip.Addr{}) })
	return bank
}

// nodeDial is a Node.js program that connects to addr (host:port) and
// prints open, refused, timeout (3 s) or the error's code, as the probe
// and fromNode name them.
func nodeDial(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf(`const s = require("net").connect({host: %q, port: %s, timeout: 3000});
s.on("connect", () => { console.log("open"); process.exit(0); });
s.on("timeout", () => { console.log("timeout"); process.exit(0); });
s.on("error", (e) => { console.log(e.code === "ECONNREFUSED" ? "refused" : String(e.code)); process.exit(0); });`, host, port)
}

// podLog is the end of a plugin pod's log (at most 16 KiB), or why it
// could not be read.
func podLog(cs kubernetes.Interface, pod string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := cs.CoreV1().Pods(plugins.Namespace).GetLogs(pod, &corev1.PodLogOptions{LimitBytes: ptr.To[int64](16 << 10)}).DoRaw(ctx)
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return string(raw)
}

func errOrOK(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// hostImage is the image of idx for this machine's platform.
func hostImage(t *testing.T, idx v1.ImageIndex) v1.Image {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	host := images.HostPlatform()
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.OS == host.OS && d.Platform.Architecture == host.Architecture {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	t.Fatalf("the index has no image for %s/%s", host.OS, host.Architecture)
	return nil
}
