//go:build cluster

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/platform"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

// checkLines are the check lines of `openfief check`'s output (a symbol,
// a name, a reason), without headings, fix lines and the summary.
func checkLines(out string) []string {
	var lines []string
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		for _, s := range []string{"  ✔ ", "  ✖ ", "  ! "} {
			if strings.HasPrefix(line, s) {
				lines = append(lines, strings.TrimPrefix(line, "  "))
			}
		}
	}
	return lines
}

// expectCheckLines fails unless out's check lines are want, in order; a
// want ending in "…" matches a line that starts with what comes before.
func expectCheckLines(t *testing.T, out string, want []string) {
	t.Helper()
	got := checkLines(out)
	for i := range got {
		if i < len(want) && strings.HasSuffix(want[i], "…") && strings.HasPrefix(got[i], strings.TrimSuffix(want[i], "…")) {
			got[i] = want[i]
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("check lines (-want +got):\n%s\n%s", diff, out)
	}
}

// impersonating writes a copy of k's kubeconfig that acts as user, for a
// check by someone without the admin's rights.
func impersonating(t *testing.T, k *kube, user string) *kube {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(k.kubeconfig)
	must(t, err)
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-"+user)
	must(t, clientcmd.WriteToFile(*cfg, path))
	return &kube{kubeconfig: path, c: k.c}
}

// publishAsOperator stands in for the operator, which no container runs
// on this control plane: once every Deployment of the platform is
// Available, and publishDelay after (so the install is seen waiting for
// it), it writes what the operator's leader publishes at start, with the
// operator's label: the API server's signing keys in openfief-sa-jwks, in
// the operator's canonical form, an empty allow-list and the embedded
// Sigstore root as the one in use. The returned function waits for it and
// fails the test if it could not publish.
func publishAsOperator(t *testing.T, pc *platformCluster) (wait func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	done := make(chan error, 1)
	go func() {
		defer cancel()
		done <- publishWhenAvailable(ctx, pc)
	}()
	return func() {
		t.Helper()
		if err := <-done; err != nil {
			t.Fatalf("standing in for the operator: %v", err)
		}
	}
}

// publishDelay is how long publishAsOperator waits after the platform is
// Available: longer than the install's poll interval of a second.
const publishDelay = 5 * time.Second

func publishWhenAvailable(ctx context.Context, pc *platformCluster) error {
	c := pc.kube.c
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, name := range []string{"openfief-core", "openfief-egress-proxy", platform.OperatorDeployment} {
			var d appsv1.Deployment
			if err := c.Get(ctx, client.ObjectKey{Namespace: plugins.Namespace, Name: name}, &d); err != nil || !platform.DeploymentAvailable(&d) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the platform's Deployments never became Available: %w", err)
	}
	select {
	case <-time.After(publishDelay):
	case <-ctx.Done():
		return ctx.Err()
	}
	dc, err := discovery.NewDiscoveryClientForConfig(pc.cluster.Config)
	if err != nil {
		return err
	}
	raw, err := dc.RESTClient().Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	if err != nil {
		return err
	}
	var conf struct{ Issuer string }
	if err := json.Unmarshal(raw, &conf); err != nil {
		return err
	}
	jwks, err := dc.RESTClient().Get().AbsPath("/openid/v1/jwks").DoRaw(ctx)
	if err != nil {
		return err
	}
	keys, err := plugins.ParseTokenKeys(jwks)
	if err != nil {
		return err
	}
	embedded, err := cosign.EmbeddedTrustRoot()
	if err != nil {
		return err
	}
	status, err := plugins.EncodeTrustRootStatus(embedded.Status)
	if err != nil {
		return err
	}
	for name, data := range map[string]map[string]string{
		plugins.TokenKeysConfigMap:       {plugins.TokenKeysJWKSKey: string(keys.JWKS()), plugins.TokenKeysIssuerKey: conf.Issuer},
		plugins.AllowListConfigMap:       nil,
		plugins.TrustRootStatusConfigMap: {plugins.TrustRootStatusKey: status},
	} {
		if err := c.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: plugins.Namespace, Name: name, Labels: map[string]string{plugins.LabelManagedBy: plugins.ValueManagedBy}},
			Data:       data,
		}); err != nil {
			return err
		}
	}
	return nil
}

var kubernetesCheckLines = []string{
	"✔ api networkpolicies networking.k8s.io/v1: NetworkPolicy",
	"✔ api serviceaccounts/token v1: TokenRequest",
	"✔ api validatingadmissionpolicies admissionregistration.k8s.io/v1: ValidatingAdmissionPolicy",
	"✔ api validatingadmissionpolicybindings admissionregistration.k8s.io/v1: ValidatingAdmissionPolicyBinding",
}

// writableKinds are the resources an install writes, as check --pre
// names them.
var writableKinds = []string{"clusterrolebindings.rbac.authorization.k8s.io", "clusterroles.rbac.authorization.k8s.io", "configmaps",
	"customresourcedefinitions.apiextensions.k8s.io", "deployments.apps", "limitranges", "namespaces", "networkpolicies.networking.k8s.io",
	"persistentvolumeclaims", "poddisruptionbudgets.policy", "resourcequotas", "rolebindings.rbac.authorization.k8s.io", "roles.rbac.authorization.k8s.io", "serviceaccounts",
	"services", "validatingadmissionpolicies.admissionregistration.k8s.io", "validatingadmissionpolicybindings.admissionregistration.k8s.io"}

// preCheckLines are `openfief check --pre` on the test's control plane
// before the install, by its admin: everything an install needs is there.
func preCheckLines() []string {
	lines := append(slices.Clone(kubernetesCheckLines),
		"✔ crd plugingrants.openfief.io: absent: the install creates it",
		"✔ crd plugins.openfief.io: absent: the install creates it",
		"✔ version: v1.37.2 (at least v1.30.0)")
	for _, k := range writableKinds {
		lines = append(lines, "✔ may write "+k+": create, list, patch")
	}
	return append(lines, "✔ namespace openfief: absent: the install creates it")
}

// deniedPreCheckLines are the same by a user without rights: the CRDs and
// the namespace cannot be read, nothing can be written.
func deniedPreCheckLines() []string {
	lines := append(slices.Clone(kubernetesCheckLines),
		`✖ crd plugingrants.openfief.io: cannot read it: customresourcedefinitions.apiextensions.k8s.io "plugingrants.openfief.io" is forbidden: User "someone" cannot get resource "customresourcedefinitions" in API group "apiextensions.k8s.io" at the cluster scope`,
		`✖ crd plugins.openfief.io: cannot read it: customresourcedefinitions.apiextensions.k8s.io "plugins.openfief.io" is forbidden: User "someone" cannot get resource "customresourcedefinitions" in API group "apiextensions.k8s.io" at the cluster scope`,
		"✔ version: v1.37.2 (at least v1.30.0)")
	for _, k := range writableKinds {
		lines = append(lines, "✖ may write "+k+": not allowed to create, list, patch")
	}
	return append(lines, `✖ namespace openfief: cannot read it: namespaces "openfief" is forbidden: User "someone" cannot get resource "namespaces" in API group "" in the namespace "openfief"`)
}

// installedCheckLines are `openfief check` after the install of v0.1.0
// (images of the overlay "one") under kwok: everything passes but the
// core, whose pods kwok only pretends to run, so no core answers through
// the service proxy and its store is not checked; the image signatures
// are a warning, not checked yet. How the core fails to answer depends on
// the machine: the API server's proxy usually gets an HTTP error at once,
// but while another package's real node runs beside this test, its
// netfilter rules can drop the proxy's connection to the played pod, and
// the call ends at the check's timeout instead.
func installedCheckLines() []string {
	image := func(name string) string {
		return "registry.example.com/openfief/" + name + "@" + testutil.Digest("one-"+name)
	}
	return append(slices.Clone(kubernetesCheckLines),
		"✔ crd plugingrants.openfief.io: v1alpha1, Established",
		"✔ crd plugins.openfief.io: v1alpha1, Established",
		"✔ version: v1.37.2 (at least v1.30.0)",
		"✔ admission binding openfief-service-account-tokens: policy openfief-service-account-tokens, Deny",
		"✔ admission binding openfief-workload-identities: policy openfief-workload-identities, Deny",
		"✔ deployment openfief-core: Available 1/1, v0.1.0, "+image("openfief-core"),
		"✔ deployment openfief-egress-proxy: Available 2/2, v0.1.0, "+image("egress-proxy"),
		"✔ deployment openfief-operator: Available 1/1, v0.1.0, "+image("operator"),
		"! image signatures: not checked yet: the platform's images are not verified against the release signer by this command",
		"✔ installed: version v0.1.0",
		"✔ allow-list openfief-egress-allowlist: readable, 0 plugins' lists",
		"✖ core answers: …",
		"✖ core store: not checked: the core does not answer",
		"✔ signing keys openfief-sa-jwks: 1 key of issuer https://127.0.0.1:…",
		"✔ sigstore root: the root embedded in this release (trusted_root.json sha256 6494e21ea73fa7ee769f85f57d5a3e6a08725eae1e38c755fc3517c9e6bc0b66)")
}

// expectCheckJSON fails unless out is check's JSON document listing the
// checks of lines (symbol and name) in the same order.
func expectCheckJSON(t *testing.T, out string, lines []string) {
	t.Helper()
	var doc struct {
		Pre, Passed bool
		Checks      []struct{ Group, Name, Status, Reason, Hint string }
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("check -o json: %v\n%s", err, out)
	}
	symbols := map[string]string{"ok": "✔", "fail": "✖", "warn": "!"}
	var got, want []string
	for _, c := range doc.Checks {
		got = append(got, symbols[c.Status]+" "+c.Name)
	}
	for _, l := range lines {
		name, _, _ := strings.Cut(l, ":")
		want = append(want, name)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("check -o json lists (-want +got):\n%s\n%s", diff, out)
	}
}
