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
