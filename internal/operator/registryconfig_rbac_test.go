//go:build cluster

package operator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestOperatorVerifiesPrivateImageUnderItsRole runs the operator as its
// ServiceAccount under the Role deploy/operator renders, which has no
// secrets permission, with the binary's image checker (no fake) and
// --registry-config pointing at a docker config.json as the registry-config
// component mounts it (D-29): a Plugin whose image is in a
// registry that requires basic auth, and redirects blob reads to another
// server, is verified from the file's credentials and reaches its workload;
// the API server refuses none of the operator's requests, the redirect
// target receives no credentials and no status names the password.
func TestOperatorVerifiesPrivateImageUnderItsRole(t *testing.T) {
	const password = "rbac-pa55-s3cret-Qx4"
	c, cl := testCluster(t)
	rbac := renderedOperatorRBAC(t)
	rbac.install(t, cl, false)

	key := cosigntest.NewKey(t)
	signers := filepath.Join(t.TempDir(), "signers.json")
	if err := os.WriteFile(signers, key.SignersJSON(t, "owner"), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := cosigntest.NewPrivateRegistry(t, "operator", password)
	m := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Egress: []string{"api.nbp.pl"}}
	ref := reg.PushImage(t, "plugins/private", cosigntest.ManifestLabel(t, m))
	reg.Sign(t, ref, key)
	reg.Lock()

	o := DefaultOptions()
	o.Cluster.Gate.Image = testutil.GateImage
	o.TrustedSignersFile = signers
	o.RegistryConfigFile = cosigntest.DockerConfig(t, "operator", password, reg.Host)
	refused, stop := runOperatorWithOptions(t, c, rbac.user(), LeaderElectionID, o)
	f := &fixture{t: t, cluster: c, cl: cl, images: newFakeImages()}

	p := testutil.MakePlugin("private-image", ref.String()).Egress("api.nbp.pl").Obj()
	f.create(p)
	f.create(testutil.GrantFor(p).Obj())
	f.waitPlugin(p.Name, "the private image verified", func(p *v1alpha1.Plugin) (bool, string) {
		if strings.Contains(describeJSON(p.Status), password) {
			t.Errorf("the status holds the password")
		}
		return apimeta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionSignatureVerified), describeJSON(p.Status.Conditions)
	})
	f.waitReady(p.Name, v1alpha1.ReasonProgressing)
	var dep appsv1.Deployment
	if !f.exists(p.Name, &dep) {
		t.Fatal("no Deployment for the verified private image")
	}
	if img := f.runningImage(p.Name); img != ref.String() {
		t.Errorf("the workload runs %s, want %s", img, ref)
	}
	if reg.StoreRequests() == 0 {
		t.Error("no blob read was redirected; the redirect is not under test")
	}
	if n := reg.StoreAuthorized(); n != 0 {
		t.Errorf("the redirect target received credentials on %d requests", n)
	}
	f.delete(p)
	stop()

	if got := refused.List(); len(got) > 0 {
		var b strings.Builder
		for _, r := range got {
			b.WriteString("\n  " + r.String())
		}
		t.Errorf("the API server refused %d requests of the operator as %s:%s", len(got), rbac.user(), b.String())
	}
}
