//go:build cluster

package realnode

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/devstack"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// TestDataPathOnRealNode runs the real nbp-fx binary, built from source, as
// the pod the operator made: its environment, projected tokens, the
// openfief-sa-jwks volume and its NetworkPolicy are the operator's and the
// kubelet's, nothing rewritten. The test, as the core, calls its Sync
// through the plugin's Service; the plugin reaches the NBP stand-in on the
// node's bridge only through the egress proxy's Service. The image differs
// from the released one only in its CA bundle, which trusts the stand-in's
// test CA. A call with another instance's token is refused.
func TestDataPathOnRealNode(t *testing.T) {
	stack, nbp := platform(t)
	ctx := t.Context()
	ref := publishNBPFx(t, stack, nbp)
	const name = "nbp-real"
	openfief(t, stack, "plugin", "install", name, "--image", ref, "--signers", stack.SignersFile)
	openfief(t, stack, "plugin", "approve", name, "--yes")
	cs, err := kubernetes.NewForConfig(stack.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	pod := runningPod(t, cs, name)
	svc, err := cs.CoreV1().Services(plugins.Namespace).Get(ctx, plugins.ServiceAccountName(name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(svc.Spec.Ports[0].Port))
	t.Logf("plugin pod %s (%s) Running; calling it through its Service %s", pod.Name, pod.Status.PodIP, base)
	client := connectorv1connect.NewConnectorServiceClient(&http.Client{Timeout: 30 * time.Second}, base)

	coreToken := requestToken(t, cs, devstack.CoreServiceAccount, "openfief-plugin:"+name)
	before := nbp.Requests.Load()
	var resp *connect.Response[connectorv1.SyncResponse]
	deadline := time.Now().Add(60 * time.Second)
	for {
		req := connect.NewRequest(&connectorv1.SyncRequest{BatchId: "real-batch-1"})
		req.Header().Set("Authorization", "Bearer "+coreToken)
		resp, err = client.Sync(ctx, req)
		if err == nil || time.Now().After(deadline) {
			break
		}
		t.Logf("Sync not yet: %v", err)
		time.Sleep(time.Second)
	}
	if err != nil {
		t.Fatalf("Sync as the core through the plugin's Service: %v", err)
	}
	d := resp.Msg.GetDelivery()
	if d.GetBatchId() != "real-batch-1" || len(d.GetFxRates()) < 2 || d.GetWatermark() == "" {
		t.Fatalf("delivery: batch %q, %d rates, watermark %q", d.GetBatchId(), len(d.GetFxRates()), d.GetWatermark())
	}
	if nbp.Requests.Load() == before {
		t.Error("the plugin did not reach the NBP stand-in")
	}
	if !strings.Contains(fmt.Sprint(d.GetFxRates()), "3.6589") {
		t.Errorf("no USD rate 3.6589 in %v", d.GetFxRates())
	}
	t.Logf("Sync delivered %d rates through the egress proxy (NBP stand-in answered %d requests)", len(d.GetFxRates()), nbp.Requests.Load()-before)

	other := requestToken(t, cs, devstack.CoreServiceAccount, "openfief-plugin:nbp-other")
	req := connect.NewRequest(&connectorv1.SyncRequest{BatchId: "real-batch-2"})
	req.Header().Set("Authorization", "Bearer "+other)
	if _, err := client.Sync(ctx, req); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("Sync with another instance's token: %v, want Unauthenticated", err)
	}
	openfief(t, stack, "plugin", "uninstall", name, "--yes", "--purge", "--wait", "60s")
}

// publishNBPFx builds nbp-fx from source and publishes it, signed, to the
// platform's registry with a CA bundle that trusts the NBP stand-in, and
// returns its reference.
func publishNBPFx(t *testing.T, stack *devstack.Stack, nbp *devstack.FakeNBP) string {
	t.Helper()
	manifestJSON, err := os.ReadFile(filepath.Join(repoRoot(t), "plugins", "nbp-fx", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := plugins.ParseManifestLabel(string(manifestJSON))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := stack.PublishImage(t.Context(), "plugins/nbp-fx-testca", manifest, map[string][]byte{
		"plugin":                            buildStatic(t, "./plugins/nbp-fx"),
		"etc/ssl/certs/ca-certificates.crt": nbp.CAPEM(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return ref.String()
}

// requestToken asks the API server for a token of a ServiceAccount in
// openfief with one audience, as the core does.
func requestToken(t *testing.T, cs kubernetes.Interface, sa, audience string) string {
	t.Helper()
	tok, _ := testutil.ServiceAccountToken(t, cs, plugins.Namespace, sa, audience)
	return tok
}

// buildStatic builds the main package pkg of this repository statically and
// returns the binary.
func buildStatic(t *testing.T, pkg string) []byte {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, pkg)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
