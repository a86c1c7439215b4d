//go:build cluster

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/devstack"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// TestDataPath runs the real nbp-fx binary as a local process with the
// environment, token files and openfief-sa-jwks content the operator
// computed for its pod, calls its Sync as the core does, and lets it reach a
// loopback NBP through the real egress proxy. A call carrying another
// instance's token is refused.
func TestDataPath(t *testing.T) {
	ctx := context.Background()
	c := kube(t)
	cs, err := kubernetes.NewForConfig(stack.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	const name = "nbp-a"
	installNBP(t, name)

	port := runLocally(t, c, cs, name, 0)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	client := connectorv1connect.NewConnectorServiceClient(http.DefaultClient, base)

	coreToken := requestToken(t, cs, devstack.CoreServiceAccount, "openfief-plugin:"+name)
	req := connect.NewRequest(&connectorv1.SyncRequest{BatchId: "e2e-batch-1"})
	req.Header().Set("Authorization", "Bearer "+coreToken)
	before := nbp.Requests.Load()
	resp, err := client.Sync(ctx, req)
	if err != nil {
		t.Fatalf("Sync as the core: %v", err)
	}
	d := resp.Msg.GetDelivery()
	if d.GetBatchId() != "e2e-batch-1" || len(d.GetFxRates()) < 2 || d.GetWatermark() == "" {
		t.Fatalf("delivery: batch %q, %d rates, watermark %q", d.GetBatchId(), len(d.GetFxRates()), d.GetWatermark())
	}
	if nbp.Requests.Load() == before {
		t.Error("the plugin did not reach NBP through the proxy")
	}
	found := false
	for _, r := range d.GetFxRates() {
		if r.String() != "" && strings.Contains(r.String(), "3.6589") {
			found = true
		}
	}
	if !found {
		t.Errorf("no USD rate 3.6589 (an exact decimal) in %v", d.GetFxRates())
	}

	// Another instance's token: the plugin refuses it before its handler.
	other := requestToken(t, cs, devstack.CoreServiceAccount, "openfief-plugin:nbp-b")
	req = connect.NewRequest(&connectorv1.SyncRequest{BatchId: "e2e-batch-2"})
	req.Header().Set("Authorization", "Bearer "+other)
	if _, err := client.Sync(ctx, req); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("Sync with another instance's token: %v, want Unauthenticated", err)
	}
	openfief(t, 0, "plugin", "uninstall", name, "--yes", "--purge", "--wait", "60s")
}

// installNBP publishes the nbp-fx image with its manifest.json, signed by
// the owner key, installs it as name, approves everything and waits until
// it runs.
func installNBP(t *testing.T, name string) {
	t.Helper()
	manifestJSON, err := os.ReadFile(filepath.Join(repoRoot(t), "plugins", "nbp-fx", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := plugins.ParseManifestLabel(string(manifestJSON))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := stack.PublishImage(context.Background(), "plugins/nbp-fx", manifest, map[string][]byte{"README": []byte("nbp-fx e2e image\n")})
	if err != nil {
		t.Fatal(err)
	}
	openfief(t, 0, "plugin", "install", name, "--image", ref.String(), "--signers", stack.SignersFile)
	openfief(t, 0, "plugin", "approve", name, "--yes")
	openfief(t, 0, "plugin", "wait", name, "--for", v1alpha1.ReasonRunning)
}

// runLocally runs the real nbp-fx binary as a local process for the
// running plugin name, with the environment, token files and
// openfief-sa-jwks content the operator computed for its pod (the
// kubelet's part done by hand), and returns the port it serves on: port,
// or a free one when port is 0.
func runLocally(t *testing.T, c client.Client, cs kubernetes.Interface, name string, port int) int {
	t.Helper()
	ctx := context.Background()
	// What the operator computed for the pod.
	var dep appsv1.Deployment
	if !get(t, c, name, &dep) {
		t.Fatal("no Deployment")
	}
	var cfg corev1.ConfigMap
	if !get(t, c, name, &cfg) {
		t.Fatal("no config ConfigMap")
	}
	var jwks corev1.ConfigMap
	testutil.Eventually(t, waitTimeout, "openfief-sa-jwks published", func() (bool, string) {
		err := c.Get(ctx, clientKey(plugins.TokenKeysConfigMap), &jwks)
		return err == nil && jwks.Data[plugins.TokenKeysJWKSKey] != "", fmt.Sprint(err)
	})

	dir := t.TempDir()
	env := podEnv(t, &dep, &cfg)
	// The kubelet's part, done by hand: token files, the jwks mount, and the
	// proxy reached on loopback instead of its ClusterIP.
	env[plugins.EnvTokenFile] = writeToken(t, cs, dir, "core-token", plugins.ServiceAccountName(name), plugins.AudienceCore)
	egressToken := env[plugins.EnvEgressTokenFile]
	if egressToken == "" {
		t.Fatal("the operator gave the pod no egress token although api.nbp.pl is granted")
	}
	env[plugins.EnvEgressTokenFile] = writeToken(t, cs, dir, "egress-token", plugins.ServiceAccountName(name), plugins.AudienceEgress)
	jwksDir := filepath.Join(dir, "jwks")
	must(t, os.MkdirAll(jwksDir, 0o700))
	for k, v := range jwks.Data {
		must(t, os.WriteFile(filepath.Join(jwksDir, k), []byte(v), 0o600))
	}
	env[plugins.EnvSAJWKSDir] = jwksDir
	if !strings.HasPrefix(env[plugins.EnvHTTPSProxy], "http://") {
		t.Fatalf("HTTPS_PROXY = %q", env[plugins.EnvHTTPSProxy])
	}
	env[plugins.EnvHTTPSProxy] = "http://" + stack.ProxyAddress
	if port == 0 {
		port = freePort(t)
	}
	env[plugins.EnvListenPort] = strconv.Itoa(port)
	env["SSL_CERT_FILE"] = nbp.CAFile()
	if env[plugins.EnvCoreSubject] != devstack.CoreSubject || env[plugins.EnvInstance] != name {
		t.Errorf("pod env names core %q and instance %q", env[plugins.EnvCoreSubject], env[plugins.EnvInstance])
	}

	startPlugin(t, env, port)
	return port
}

// podEnv is the plugin container's environment as the operator set it, with
// OPENFIEF_CONFIG taken from the config ConfigMap it references.
func podEnv(t *testing.T, dep *appsv1.Deployment, cfg *corev1.ConfigMap) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.ConfigMapKeyRef != nil && e.ValueFrom.ConfigMapKeyRef.Name == cfg.Name:
			env[e.Name] = cfg.Data[e.ValueFrom.ConfigMapKeyRef.Key]
		default:
			t.Fatalf("env %s comes from somewhere the test does not model", e.Name)
		}
	}
	return env
}

// requestToken asks the API server for a token of a ServiceAccount in
// openfief with one audience, as the kubelet and the core do.
func requestToken(t *testing.T, cs kubernetes.Interface, sa, audience string) string {
	t.Helper()
	tok, _ := testutil.ServiceAccountToken(t, cs, plugins.Namespace, sa, audience)
	return tok
}

// writeToken writes a projected-token file the way the kubelet does: a
// directory holding a file named token.
func writeToken(t *testing.T, cs kubernetes.Interface, dir, sub, sa, audience string) string {
	t.Helper()
	d := filepath.Join(dir, sub)
	must(t, os.MkdirAll(d, 0o700))
	p := filepath.Join(d, "token")
	must(t, os.WriteFile(p, []byte(requestToken(t, cs, sa, audience)), 0o600))
	return p
}

// startPlugin builds plugins/nbp-fx and runs it with env until the test ends.
func startPlugin(t *testing.T, env map[string]string, port int) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nbp-fx")
	build := exec.Command("go", "build", "-o", bin, "./plugins/nbp-fx")
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build nbp-fx: %v\n%s", err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	must(t, cmd.Start())
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		t.Logf("nbp-fx output:\n%s", logs.String())
	})
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("nbp-fx to listen on %d", port), func() (bool, string) {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err != nil {
			return false, err.Error()
		}
		_ = conn.Close() // only the dial is probed
		return true, ""
	})
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	must(t, ln.Close()) // the port is free for nbp-fx only once this succeeds
	return port
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
