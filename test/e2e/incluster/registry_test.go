//go:build cluster

package incluster

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// operatorRegistrySecret is the Secret deploy/operator/components/registry-config
// mounts into the operator's pod (docs/operator.md, Private registries).
const operatorRegistrySecret = "openfief-registry-config"

// pullSecretName is the Secret the private-registry phase grants a plugin
// as its image pull Secret.
const pullSecretName = "private-registry-pull"

// registryCreds are the one user and password a private registry accepts,
// made up per run. They are never logged.
type registryCreds struct{ username, password string }

func newRegistryCreds(t *testing.T) *registryCreds {
	t.Helper()
	b := make([]byte, 16)
	_, err := rand.Read(b)
	must(t, err)
	return &registryCreds{username: "openfief-e2e", password: hex.EncodeToString(b)}
}

// require answers 401 with a Basic challenge, as a registry does, to every
// request that does not carry the credentials, and passes the rest to next.
func (c *registryCreds) require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(c.username)) != 1 || subtle.ConstantTimeCompare([]byte(p), []byte(c.password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="openfief-e2e"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// dockerConfig is a docker config.json (what `docker login` writes, and a
// kubernetes.io/dockerconfigjson Secret's .dockerconfigjson) holding the
// credentials for each of hosts.
func (c *registryCreds) dockerConfig(hosts ...string) []byte {
	auths := map[string]map[string]string{}
	for _, h := range hosts {
		auths[h] = map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(c.username + ":" + c.password))}
	}
	b, _ := json.Marshal(map[string]any{"auths": auths}) // maps of strings always marshal
	return b
}

// startPrivateRegistry serves a registry that requires credentials and
// prepares everything that must exist before `platform install`, because
// the registry-config component makes the operator's pod wait for its
// Secret: the Secret openfief-registry-config with the credentials for the
// registry's bridge name (the operator reads there), and, for the test's
// own pushes and the CLI, a docker config for both its names in
// e.dockerConfigDir. The namespace must exist.
func startPrivateRegistry(t *testing.T, e *platformEnv) {
	t.Helper()
	e.private = startRegistry(t, e.c, newRegistryCreds(t))
	e.dockerConfigDir = filepath.Join(e.work, "docker")
	must(t, os.MkdirAll(e.dockerConfigDir, 0o700))
	must(t, os.WriteFile(filepath.Join(e.dockerConfigDir, "config.json"), e.private.creds.dockerConfig(e.private.loopback, e.private.bridge), 0o600))
	must(t, createDockerConfigSecret(context.Background(), e.cs, operatorRegistrySecret, e.private.creds.dockerConfig(e.private.bridge)))
}

// createDockerConfigSecret creates a kubernetes.io/dockerconfigjson Secret
// in the platform's namespace, as `kubectl create secret docker-registry`
// does.
func createDockerConfigSecret(ctx context.Context, cs kubernetes.Interface, name string, config []byte) error {
	_, err := cs.CoreV1().Secrets(plugins.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plugins.Namespace},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: config},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create Secret %s/%s: %w", plugins.Namespace, name, err)
	}
	return nil
}

// testPrivateRegistry publishes the probe, signed by the owner, to a
// registry that refuses anonymous reads, and installs it twice. The
// operator's pod reads it with the credentials of openfief-registry-config
// (both Plugins' signatures verify). The instance approved without a pull
// Secret cannot start: the kubelet's anonymous pull is refused with a 401.
// The instance whose grant names a docker-registry Secret (`plugin approve
// --all --pull-secret`) runs: its pod names the Secret and the kubelet pulled with
// it.
//
// The refused instance goes first and is uninstalled before the other is
// approved: plugin pods pull IfNotPresent, so once the image is on the node
// any pod naming its digest would start without pulling (see OF-25).
func testPrivateRegistry(t *testing.T, e *platformEnv) {
	ctx := context.Background()
	cs := e.cs
	reg := e.private
	// ocisign's pushes and signatures read credentials from the Docker config.
	t.Setenv("DOCKER_CONFIG", e.dockerConfigDir)
	registryConfig := filepath.Join(e.dockerConfigDir, "config.json")
	ref := reg.publish(t, "plugins/probe", nbpFxManifest(t, e.root), map[string][]byte{"plugin": e.probeBinary(t)}, e.signer)
	t.Logf("published the probe as %s on the private registry", ref)

	// The registry really is private: the manifest is there for the
	// credentials and refused without them.
	manifestURL := "http://" + reg.bridge + "/v2/" + ref.Repository() + "/manifests/" + ref.Digest()
	if code := httpStatus(t, manifestURL, nil); code != http.StatusUnauthorized {
		t.Fatalf("an anonymous read of %s: status %d, want 401: the registry is not private", manifestURL, code)
	}
	if code := httpStatus(t, manifestURL, reg.creds); code != http.StatusOK {
		t.Fatalf("a read of %s with the credentials: status %d, want 200", manifestURL, code)
	}
	t.Logf("GET %s: 401 anonymously, 200 with the credentials", manifestURL)

	install := func(name string) {
		openfief(t, e.kubeconfig, "plugin", "install", name, "--image", ref.String(), "--signers", e.signersFile,
			"--insecure-registry", reg.bridge, "--registry-config", registryConfig)
	}
	const (
		refused = "private-nopull"
		pulled  = "private"
	)
	install(refused)
	install(pulled)
	uninstallOnFailure(t, e, refused, pulled)
	kc := mustClient(t, e.c)
	for _, name := range []string{refused, pulled} {
		signatureVerified(t, kc, name)
	}

	// Without a pull Secret the kubelet pulls anonymously and is refused.
	openfief(t, e.kubeconfig, "plugin", "approve", refused, "--yes")
	pod := pullRefusedPod(t, cs, refused)
	if len(pod.Spec.ImagePullSecrets) != 0 {
		t.Errorf("pod %s of %s names pull Secrets %v, want none", pod.Name, refused, pod.Spec.ImagePullSecrets)
	}
	openfief(t, e.kubeconfig, "plugin", "uninstall", refused, "--yes", "--purge", "--wait", "60s")

	// With it, the kubelet pulls with its credentials.
	must(t, createDockerConfigSecret(ctx, cs, pullSecretName, reg.creds.dockerConfig(reg.bridge)))
	out := openfief(t, e.kubeconfig, "plugin", "approve", pulled, "--all", "--pull-secret", pullSecretName, "--yes")
	if !strings.Contains(out, pullSecretName) {
		t.Errorf("plugin approve did not say it grants pull Secret %s", pullSecretName)
	}
	pod = runningPluginPod(t, cs, pulled)
	if !slices.Contains(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: pullSecretName}) {
		t.Errorf("pod %s of %s names pull Secrets %v, want %s", pod.Name, pulled, pod.Spec.ImagePullSecrets, pullSecretName)
	}
	if st := pod.Status.ContainerStatuses[0]; !strings.HasSuffix(st.ImageID, ref.Digest()) {
		t.Errorf("pod %s runs image %s, want digest %s", pod.Name, st.ImageID, ref.Digest())
	}
	t.Logf("plugin %s: pod %s Running, pulled from the private registry with Secret %s", pulled, pod.Name, pullSecretName)
	openfief(t, e.kubeconfig, "plugin", "uninstall", pulled, "--yes", "--purge", "--wait", "60s")
	// --purge deletes the Secrets only that plugin used; the pull Secret may
	// be one of them.
	if err := cs.CoreV1().Secrets(plugins.Namespace).Delete(ctx, pullSecretName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting Secret %s: %v", pullSecretName, err)
	}
}

// uninstallOnFailure uninstalls (with --purge) those of plugins still
// installed when t ends failed, so a phase that stopped half-way leaves the
// next the platform as it found it.
func uninstallOnFailure(t *testing.T, e *platformEnv, plugins ...string) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, name := range plugins {
			code, out := e.cli(context.Background(), "plugin", "uninstall", name, "--yes", "--purge", "--wait", "60s")
			t.Logf("cleanup: openfief plugin uninstall %s: exit %d: %s", name, code, strings.TrimSpace(out))
		}
	})
}

// httpStatus is the status of a GET of url asking for an OCI manifest,
// with creds' basic authentication when creds is set.
func httpStatus(t *testing.T, url string, creds *registryCreds) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	must(t, err)
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json")
	if creds != nil {
		req.SetBasicAuth(creds.username, creds.password)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// signatureVerified waits until the operator has verified the Plugin's
// image, which it can only read from the private registry with the
// credentials of its mounted Secret.
func signatureVerified(t *testing.T, kc client.Client, name string) {
	t.Helper()
	testutil.Eventually(t, time.Minute, "plugin "+name+": SignatureVerified=True (the operator read the private registry)", func() (bool, string) {
		var p v1alpha1.Plugin
		if err := kc.Get(context.Background(), client.ObjectKey{Namespace: plugins.Namespace, Name: name}, &p); err != nil {
			return false, err.Error()
		}
		c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionSignatureVerified)
		if c == nil {
			return false, "no SignatureVerified condition yet"
		}
		return c.Status == metav1.ConditionTrue, fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
	})
}

// pullRefusedPod waits (at most 2 minutes) until the plugin's one pod waits
// in ErrImagePull or ImagePullBackOff and the kubelet's words on it (the
// container's waiting message or the pod's events) say the registry refused
// it for want of credentials (a 401), and returns the pod.
func pullRefusedPod(t *testing.T, cs kubernetes.Interface, plugin string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	var pod *corev1.Pod
	var evidence string
	testutil.Eventually(t, 2*time.Minute, "plugin "+plugin+"'s pod refused its image pull with a 401", func() (bool, string) {
		pods, err := cs.CoreV1().Pods(plugins.Namespace).List(ctx, metav1.ListOptions{LabelSelector: plugins.LabelPluginName + "=" + plugin})
		if err != nil {
			return false, err.Error()
		}
		if len(pods.Items) != 1 {
			return false, fmt.Sprintf("%d pods", len(pods.Items))
		}
		pod = &pods.Items[0]
		if len(pod.Status.ContainerStatuses) != 1 {
			return false, fmt.Sprintf("%s, no container status yet", pod.Status.Phase)
		}
		st := pod.Status.ContainerStatuses[0]
		if st.State.Running != nil {
			t.Fatalf("pod %s of %s runs without a pull Secret: the image was not pulled from a private registry", pod.Name, plugin)
		}
		w := st.State.Waiting
		if w == nil || (w.Reason != "ErrImagePull" && w.Reason != "ImagePullBackOff") {
			return false, fmt.Sprintf("%s %+v", pod.Status.Phase, st.State)
		}
		words := []string{w.Message}
		events, err := cs.CoreV1().Events(plugins.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + pod.Name,
		})
		if err == nil {
			for _, ev := range events.Items {
				if ev.Reason == "Failed" {
					words = append(words, ev.Message)
				}
			}
		}
		for _, s := range words {
			// containerd says "authorization failed: no basic auth
			// credentials" for a 401 with a Basic challenge.
			if l := strings.ToLower(s); strings.Contains(l, "401") || strings.Contains(l, "unauthorized") || strings.Contains(l, "authorization failed") {
				evidence = w.Reason + ": " + s
				return true, ""
			}
		}
		return false, fmt.Sprintf("%s, no 401 in %q", w.Reason, words)
	})
	t.Logf("plugin %s: pod %s %s", plugin, pod.Name, evidence)
	return pod
}
