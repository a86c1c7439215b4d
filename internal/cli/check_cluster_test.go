//go:build cluster

package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// publishAsOperator writes what the operator publishes at start, which no
// operator does on this control plane: the API server's signing keys in
// openfief-sa-jwks, in the operator's canonical form, an empty
// allow-list and the embedded Sigstore root as the one in use.
func publishAsOperator(t *testing.T, pc *platformCluster) {
	t.Helper()
	ctx := context.Background()
	dc, err := discovery.NewDiscoveryClientForConfig(pc.cluster.Config)
	must(t, err)
	raw, err := dc.RESTClient().Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	must(t, err)
	var conf struct{ Issuer string }
	must(t, json.Unmarshal(raw, &conf))
	jwks, err := dc.RESTClient().Get().AbsPath("/openid/v1/jwks").DoRaw(ctx)
	must(t, err)
	keys, err := plugins.ParseTokenKeys(jwks)
	must(t, err)
	must(t, pc.kube.c.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: plugins.Namespace, Name: plugins.TokenKeysConfigMap},
		Data:       map[string]string{plugins.TokenKeysJWKSKey: string(keys.JWKS()), plugins.TokenKeysIssuerKey: conf.Issuer},
	}))
	must(t, pc.kube.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: plugins.Namespace, Name: plugins.AllowListConfigMap}}))
	embedded, err := cosign.EmbeddedTrustRoot()
	must(t, err)
	status, err := plugins.EncodeTrustRootStatus(embedded.Status)
	must(t, err)
	must(t, pc.kube.c.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: plugins.Namespace, Name: plugins.TrustRootStatusConfigMap},
		Data:       map[string]string{plugins.TrustRootStatusKey: status},
	}))
}

// unpublish removes what publishAsOperator wrote.
func unpublish(t *testing.T, c client.Client) {
	t.Helper()
	for _, name := range []string{plugins.TokenKeysConfigMap, plugins.AllowListConfigMap, plugins.TrustRootStatusConfigMap} {
		must(t, client.IgnoreNotFound(c.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: plugins.Namespace, Name: name}})))
	}
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
