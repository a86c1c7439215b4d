package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/harness"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// The command tests run openfief in-process with an in-process registry of
// images signed with an owner key that a signers.json in the test's
// directory trusts. Those built with `-tags cluster` also run against the
// package's shared minimal control plane (a real kube-apiserver and etcd
// with the CRDs from deploy/crds, newKube in kube_test.go). The operator
// does not run: tests check the objects the CLI writes, and write a
// Plugin's status by hand where a command reads it.

// images is a registry with an owner key and a signers.json trusting it.
type images struct {
	reg     *cosigntest.Registry
	key     *cosigntest.Key
	signers string
}

func newImages(t *testing.T) *images {
	t.Helper()
	im := &images{reg: cosigntest.NewRegistry(t, true), key: cosigntest.NewKey(t)}
	im.signers = filepath.Join(t.TempDir(), "signers.json")
	writeFile(t, im.signers, im.signersJSON(t))
	return im
}

// signersJSON is a signers.json trusting the owner key as "owner".
func (im *images) signersJSON(t *testing.T) string {
	t.Helper()
	return string(im.key.SignersJSON(t, "owner"))
}

// signed pushes an image labelled with m and signs it with the owner key.
func (im *images) signed(t *testing.T, repo string, m plugins.Manifest) plugins.ImageRef {
	t.Helper()
	ref := im.reg.PushImage(t, repo, cosigntest.ManifestLabel(t, m))
	im.sign(t, ref)
	return ref
}

func (im *images) sign(t *testing.T, ref plugins.ImageRef) {
	t.Helper()
	im.reg.Sign(t, ref, im.key)
}

// unsigned pushes an image labelled with m and signs nothing.
func (im *images) unsigned(t *testing.T, repo string, m plugins.Manifest) plugins.ImageRef {
	t.Helper()
	return im.reg.PushImage(t, repo, cosigntest.ManifestLabel(t, m))
}

// kube is the shared control plane with the openfief namespace.
type kube struct {
	kubeconfig string
	c          client.Client
}

// result is what one run of openfief left.
type result struct {
	code        int
	out, errOut string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.out, r.errOut)
}

// runOpts are the streams and clock of one run.
type runOpts struct {
	stdin       string
	interactive bool
	now         time.Time
	verifier    []cosign.Option
	// builtinCatalog stands for the catalog a release links into the CLI.
	builtinCatalog []byte
	// pluginRuntime runs `plugin test`'s plugin (the local-process stand-in).
	pluginRuntime harness.Starter
	// ownerMint mints the owner's token (a core on loopback, no cluster).
	ownerMint func(context.Context) (string, error)
}

// openfief runs the CLI in-process with args, against k's cluster when k is
// not nil.
func openfief(t *testing.T, k *kube, o runOpts, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	env := NewEnv(Streams{In: strings.NewReader(o.stdin), Out: &out, ErrOut: &errOut, Interactive: o.interactive})
	if !o.now.IsZero() {
		env.Now = func() time.Time { return o.now }
	}
	env.verifierOptions = o.verifier
	env.builtinCatalog = o.builtinCatalog
	env.pluginRuntime = o.pluginRuntime
	env.ownerMint = o.ownerMint
	if k != nil {
		args = append([]string{"--kubeconfig", k.kubeconfig}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := run(ctx, env, args)
	return result{code: code, out: out.String(), errOut: errOut.String()}
}

// expect fails unless r exited with code and its output holds every want.
func expect(t *testing.T, r result, code int, want ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\n%s", r.code, code, r)
	}
	for _, w := range want {
		if !strings.Contains(r.out+r.errOut, w) {
			t.Errorf("output lacks %q\n%s", w, r)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// tempFile writes content to a new file in the test's directory.
func tempFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	writeFile(t, p, content)
	return p
}

// get reads the object name in openfief into obj and reports whether it
// exists.
func (k *kube) get(t *testing.T, name string, obj client.Object) bool {
	t.Helper()
	err := k.c.Get(context.Background(), client.ObjectKey{Namespace: plugins.Namespace, Name: name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// plugin is the Plugin name, nil when there is none.
func (k *kube) plugin(t *testing.T, name string) *v1alpha1.Plugin {
	t.Helper()
	var p v1alpha1.Plugin
	if !k.get(t, name, &p) {
		return nil
	}
	return &p
}

// grant is the PluginGrant name, nil when there is none.
func (k *kube) grant(t *testing.T, name string) *v1alpha1.PluginGrant {
	t.Helper()
	var g v1alpha1.PluginGrant
	if !k.get(t, name, &g) {
		return nil
	}
	return &g
}

func (k *kube) secretExists(t *testing.T, name string) bool {
	t.Helper()
	return k.get(t, name, &corev1.Secret{})
}

func (k *kube) createSecret(t *testing.T, name string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plugins.Namespace}, StringData: map[string]string{"token": "x"}}
	if err := k.c.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// Manifests of the test images.
var (
	fxSchema = json.RawMessage(`{"type":"object","properties":{"currency":{"type":"string","pattern":"^[A-Z]{3}$"}},"required":["currency"],"additionalProperties":false}`)
	// fxV1 asks for one host and one Secret slot, with a config schema.
	fxV1 = plugins.Manifest{
		Capabilities: []plugins.Capability{plugins.CapabilityConnector},
		Egress:       []string{"api.nbp.pl"},
		Secrets:      []plugins.SecretMount{{Name: "fx-token", MountPath: "/etc/fx"}},
		DataTiers:    []string{"rates"},
		ConfigSchema: fxSchema,
	}
	// fxV2 asks for one more host.
	fxV2 = plugins.Manifest{
		Capabilities: fxV1.Capabilities,
		Egress:       []string{"api.nbp.pl", "static.nbp.pl:8443"},
		Secrets:      fxV1.Secrets,
		DataTiers:    fxV1.DataTiers,
		ConfigSchema: fxSchema,
	}
)

const fxConfig = "currency: PLN\n"
