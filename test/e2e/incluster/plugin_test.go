//go:build cluster

package incluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/devstack"
	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// pluginRegistry is a registry for plugin images that both the machine and
// the pods reach: it serves one port on loopback (where the test pushes and
// signs, over plain HTTP as loopback registries are) and on the node's
// bridge address (the name the Plugin uses, which the operator's pod reads
// and the kubelet pulls, trusted as plain HTTP by the node). The open one
// is devstack's (no srv here); a private one (creds set) answers only
// requests with its credentials, on both.
type pluginRegistry struct {
	loopback, bridge string
	srv              *http.Server
	creds            *registryCreds
}

// startRegistry serves a registry on one port of loopback and of the node's
// bridge address, behind HTTP basic authentication when creds is set, and
// has the node trust it as plain HTTP.
func startRegistry(t *testing.T, c *devcluster.Cluster, creds *registryCreds) *pluginRegistry {
	t.Helper()
	lb, br, err := devstack.ListenBoth(c.NodeGateway().String())
	must(t, err)
	h := registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0)))
	if creds != nil {
		h = creds.require(h)
	}
	r := &pluginRegistry{loopback: lb.Addr().String(), bridge: br.Addr().String(), creds: creds, srv: &http.Server{
		Handler:           h,
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
	m := nbpFxManifest(t, root)
	m.Egress = append(m.Egress, extraEgress...)
	return r.publish(t, "plugins/nbp-fx", m, map[string][]byte{
		"plugin":                            buildStatic(t, root, "./plugins/nbp-fx"),
		"etc/ssl/certs/ca-certificates.crt": caPEM,
	}, signer)
}

// publish packs files (the program as "plugin") with manifest into a
// plugin image, pushes it to repo through loopback and signs it with
// signer; it returns the image by its bridge name. A private registry's
// writes use the credentials of the Docker config ($DOCKER_CONFIG), as
// ocisign's do.
func (r *pluginRegistry) publish(t *testing.T, repo string, m plugins.Manifest, files map[string][]byte, signer *ocisign.KeySigner) plugins.ImageRef {
	t.Helper()
	img, err := ocisign.PluginImage(m, files)
	must(t, err)
	local, err := ocisign.Push(context.Background(), r.loopback, repo, img)
	must(t, err)
	must(t, signer.Sign(context.Background(), local))
	ref, err := plugins.ParseImageRef(r.bridge + "/" + repo + "@" + local.Digest())
	must(t, err)
	return ref
}

// nbpFxManifest is plugins/nbp-fx/manifest.json, the label nbp-fx is signed
// with; the probe plays a plugin under it too.
func nbpFxManifest(t *testing.T, root string) plugins.Manifest {
	t.Helper()
	return pluginManifest(t, root, "nbp-fx")
}

// pluginManifest is plugins/NAME/manifest.json, the label the first-party
// plugin name is signed with.
func pluginManifest(t *testing.T, root, name string) plugins.Manifest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "plugins", name, "manifest.json"))
	must(t, err)
	m, err := plugins.ParseManifestLabel(string(raw))
	must(t, err)
	return m
}

// buildStatic builds the main package pkg of the tree at root without cgo
// and returns the binary.
func buildStatic(t *testing.T, root, pkg string) []byte {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, pkg)
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, out)
	}
	data, err := os.ReadFile(bin)
	must(t, err)
	return data
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
