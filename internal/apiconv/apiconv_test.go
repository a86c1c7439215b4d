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

// TestResources checks a manifest's and a grant's resources survive the
// conversion both ways as written (the domain parses them), that none
// converts to nil, and that pending and effective resources reach the status.
func TestResources(t *testing.T) {
	r := plugins.Resources{Memory: "512Mi", CPU: "1", Tmp: "256Mi"}
	m := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Resources: r}
	api := ManifestToAPI(m)
	if want := (v1alpha1.Resources{Memory: "512Mi", CPU: "1", Tmp: "256Mi"}); api.Resources == nil || *api.Resources != want {
		t.Fatalf("ManifestToAPI resources = %+v, want %+v", api.Resources, want)
	}
	if back := ManifestFromAPI(api); back.Resources != r || !back.Equal(m) {
		t.Errorf("ManifestFromAPI(ManifestToAPI(m)) resources = %+v, want %+v", back.Resources, r)
	}
	if ManifestToAPI(plugins.Manifest{}).Resources != nil || ResourcesToAPI(plugins.Resources{}) != nil {
		t.Error("no resources convert to a non-nil field")
	}
	if got := ManifestFromAPI(v1alpha1.Manifest{}).Resources; !got.IsZero() {
		t.Errorf("a manifest without resources converts to %+v", got)
	}

	spec := GrantToAPI(plugins.Grant{Name: "fx", Resources: plugins.Resources{Memory: "1Gi"}})
	if spec.Resources == nil || spec.Resources.Memory != "1Gi" || spec.Resources.CPU != "" {
		t.Fatalf("GrantToAPI resources = %+v", spec.Resources)
	}
	g := GrantFromAPI(&v1alpha1.PluginGrant{ObjectMeta: metav1.ObjectMeta{Name: "fx"}, Spec: spec})
	if g.Resources != (plugins.Resources{Memory: "1Gi"}) {
		t.Errorf("GrantFromAPI resources = %+v", g.Resources)
	}

	p := PendingToAPI(plugins.NeedsApproval(m, nil))
	if p == nil || p.Resources == nil || *p.Resources != (v1alpha1.Resources{Memory: "512Mi", CPU: "1", Tmp: "256Mi"}) {
		t.Errorf("PendingToAPI resources = %+v", p)
	}
	if p := PendingToAPI(plugins.Pending{Resources: plugins.Resources{CPU: "2"}}); p == nil || p.Resources.CPU != "2" {
		t.Errorf("only resources pending converts to %+v", p)
	}

	grant := plugins.Grant{Name: "fx", Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Resources: plugins.Resources{Memory: "512Mi"}}
	e, err := plugins.Effective(plugins.Plugin{Name: "fx", Manifest: m}, grant)
	if err != nil {
		t.Fatal(err)
	}
	got := EffectiveToAPI(&e).Resources
	if want := (v1alpha1.Resources{Memory: "512Mi", CPU: "500m", Tmp: "64Mi"}); got == nil || *got != want {
		t.Errorf("EffectiveToAPI resources = %+v, want %+v", got, want)
	}
}
