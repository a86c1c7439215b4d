//go:build cluster

package incluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// pluginRegistry is a registry for plugin images that both the machine and
// the pods reach: it serves one port on loopback (where the test pushes and
// signs, over plain HTTP as loopback registries are) and on the node's
// bridge address (the name the Plugin uses, which the operator's pod reads
// and the kubelet pulls, trusted as plain HTTP by the node).
type pluginRegistry struct {
	loopback, bridge string
	srv              *http.Server
}

func startPluginRegistry(t *testing.T, c *devcluster.Cluster) *pluginRegistry {
	t.Helper()
	gw := c.NodeGateway().String()
	var lb, br net.Listener
	for try := 0; ; try++ {
		var err error
		br, err = net.Listen("tcp", net.JoinHostPort(gw, "0"))
		must(t, err)
		port := strconv.Itoa(br.Addr().(*net.TCPAddr).Port)
		if lb, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", port)); err == nil {
			break
		}
		_ = br.Close()
		if try == 10 {
			t.Fatalf("no port free on both loopback and %s: %v", gw, err)
		}
	}
	r := &pluginRegistry{loopback: lb.Addr().String(), bridge: br.Addr().String(), srv: &http.Server{
		Handler:           registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))),
		ReadHeaderTimeout: 10 * time.Second,
	}}
	go func() { _ = r.srv.Serve(lb) }()
	go func() { _ = r.srv.Serve(br) }()
	t.Cleanup(func() { _ = r.srv.Close() })
	must(t, c.TrustRegistry(r.bridge))
	return r
}

// publishNBPFx builds nbp-fx statically, packs it with its manifest and a
// CA bundle holding only caPEM (the NBP stand-in's CA) into a plugin
// image, pushes it and signs it with signer; it returns the image by its
// bridge name. extraEgress are hosts its label asks for besides those of
// plugins/nbp-fx/manifest.json (a new version asking for more).
func (r *pluginRegistry) publishNBPFx(t *testing.T, root string, signer *ocisign.KeySigner, caPEM []byte, extraEgress ...string) plugins.ImageRef {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "plugins", "nbp-fx", "manifest.json"))
	must(t, err)
	m, err := plugins.ParseManifestLabel(string(raw))
	must(t, err)
	m.Egress = append(m.Egress, extraEgress...)
	bin := filepath.Join(t.TempDir(), "nbp-fx")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./plugins/nbp-fx")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building nbp-fx: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	must(t, err)
	img, err := ocisign.PluginImage(m, map[string][]byte{"plugin": data, "etc/ssl/certs/ca-certificates.crt": caPEM})
	must(t, err)
	local, err := ocisign.Push(context.Background(), r.loopback, "plugins/nbp-fx", img)
	must(t, err)
	must(t, signer.Sign(context.Background(), local))
	ref, err := plugins.ParseImageRef(r.bridge + "/plugins/nbp-fx@" + local.Digest())
	must(t, err)
	return ref
}

// openfief runs one CLI command in this process and returns its output; a
// non-zero exit fails the test.
func openfief(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	code := cli.Main(context.Background(), append([]string{"--kubeconfig", kubeconfig}, args...),
		cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	t.Logf("$ openfief %s (exit %d)\n%s", strings.Join(args, " "), code, out.String())
	if code != cli.ExitOK {
		t.Fatalf("openfief %s exited %d", strings.Join(args, " "), code)
	}
	return out.String()
}

// runningPluginPod waits until the plugin's one pod runs as a container.
func runningPluginPod(t *testing.T, cs kubernetes.Interface, plugin string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	testutil.Eventually(t, 3*time.Minute, "plugin "+plugin+"'s pod Running", func() (bool, string) {
		pods, err := cs.CoreV1().Pods(plugins.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: plugins.LabelPluginName + "=" + plugin})
		if err != nil {
			return false, err.Error()
		}
		if len(pods.Items) != 1 {
			return false, fmt.Sprintf("%d pods", len(pods.Items))
		}
		pod = &pods.Items[0]
		running := len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].State.Running != nil
		return pod.Status.Phase == corev1.PodRunning && running, fmt.Sprintf("%s %+v", pod.Status.Phase, pod.Status.ContainerStatuses)
	})
	return pod
}
