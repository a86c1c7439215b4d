package apiconv

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestGrantImagePullSecrets checks the grant's pull Secrets survive the
// conversion both ways and share no slice with the input.
func TestGrantImagePullSecrets(t *testing.T) {
	in := &v1alpha1.PluginGrant{
		ObjectMeta: metav1.ObjectMeta{Name: "fx"},
		Spec:       v1alpha1.PluginGrantSpec{Capabilities: []v1alpha1.Capability{"connector"}, ImagePullSecrets: []string{"regcred", "ghcr-pull"}},
	}
	g := GrantFromAPI(in)
	if want := []string{"regcred", "ghcr-pull"}; !slices.Equal(g.ImagePullSecrets, want) {
		t.Fatalf("GrantFromAPI pull secrets = %v, want %v", g.ImagePullSecrets, want)
	}
	g.ImagePullSecrets[0] = "changed"
	if in.Spec.ImagePullSecrets[0] != "regcred" {
		t.Error("GrantFromAPI shares the pull Secrets with the resource")
	}
	out := GrantToAPI(plugins.Grant{Name: "fx", ImagePullSecrets: []string{"regcred"}})
	if !slices.Equal(out.ImagePullSecrets, []string{"regcred"}) {
		t.Errorf("GrantToAPI pull secrets = %v", out.ImagePullSecrets)
	}
	if GrantToAPI(plugins.Grant{Name: "fx"}).ImagePullSecrets != nil {
		t.Error("GrantToAPI sets pull secrets for a grant without any")
	}
}

// TestOwnerEgress checks the manifest's owner egress slots and the grant's
// hosts of the owner's choosing survive the conversion both ways, and that
// a slot count int32 cannot hold becomes one the CRD refuses, never a count
// that wrapped around into range.
func TestOwnerEgress(t *testing.T) {
	m := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityView}, OwnerEgress: 2}
	api := ManifestToAPI(m)
	if api.OwnerEgress != 2 {
		t.Fatalf("ManifestToAPI ownerEgress = %d, want 2", api.OwnerEgress)
	}
	if back := ManifestFromAPI(api); !back.Equal(m) || back.OwnerEgress != 2 {
		t.Errorf("ManifestFromAPI(ManifestToAPI(m)) = %+v, want %+v", back, m)
	}
	for _, n := range []int{1<<32 + 1, -(1<<32 - 1)} {
		if got := ManifestToAPI(plugins.Manifest{OwnerEgress: n}).OwnerEgress; got != -1 {
			t.Errorf("ManifestToAPI ownerEgress %d = %d, want -1", n, got)
		}
	}

	g := plugins.Grant{Name: "webdav", Egress: []string{"api.example.com"}, OwnerEgress: []string{"cloud.example.com", "nas.example.org:8443"}}
	spec := GrantToAPI(g)
	if want := []v1alpha1.EgressHost{"cloud.example.com", "nas.example.org:8443"}; !slices.Equal(spec.OwnerEgress, want) {
		t.Fatalf("GrantToAPI ownerEgress = %v, want %v", spec.OwnerEgress, want)
	}
	back := GrantFromAPI(&v1alpha1.PluginGrant{ObjectMeta: metav1.ObjectMeta{Name: "webdav"}, Spec: spec})
	if !slices.Equal(back.OwnerEgress, g.OwnerEgress) || !slices.Equal(back.Egress, g.Egress) {
		t.Errorf("GrantFromAPI = %+v, want %+v", back, g)
	}
	if GrantToAPI(plugins.Grant{Name: "fx"}).OwnerEgress != nil {
		t.Error("GrantToAPI sets ownerEgress for a grant without any")
	}
}
