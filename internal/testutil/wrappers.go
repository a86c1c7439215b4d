package testutil

import (
	"encoding/json"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// PluginWrapper builds a v1alpha1.Plugin for a test fluently:
// MakePlugin(name, image).Egress(...).Secret(...).Obj().
type PluginWrapper struct{ v1alpha1.Plugin }

// MakePlugin starts a Plugin in the openfief namespace running image as a
// connector, with no egress, Secrets, data tiers, schema or config.
func MakePlugin(name, image string) *PluginWrapper {
	return &PluginWrapper{v1alpha1.Plugin{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plugins.Namespace},
		Spec: v1alpha1.PluginSpec{Image: image, Manifest: v1alpha1.Manifest{
			Capabilities: []v1alpha1.Capability{v1alpha1.Capability(plugins.CapabilityConnector)},
		}},
	}}
}

// Capabilities replaces the capabilities the manifest asks for.
func (w *PluginWrapper) Capabilities(caps ...v1alpha1.Capability) *PluginWrapper {
	w.Spec.Manifest.Capabilities = caps
	return w
}

// Egress adds hosts to the manifest's egress list.
func (w *PluginWrapper) Egress(hosts ...string) *PluginWrapper {
	for _, h := range hosts {
		w.Spec.Manifest.Egress = append(w.Spec.Manifest.Egress, v1alpha1.EgressHost(h))
	}
	return w
}

// OwnerEgress sets how many hosts of the owner's choosing the manifest allows.
func (w *PluginWrapper) OwnerEgress(slots int32) *PluginWrapper {
	w.Spec.Manifest.OwnerEgress = slots
	return w
}

// Secret adds a Secret slot mounted at path to the manifest.
func (w *PluginWrapper) Secret(name, path string) *PluginWrapper {
	w.Spec.Manifest.Secrets = append(w.Spec.Manifest.Secrets, v1alpha1.SecretMount{Name: name, MountPath: path})
	return w
}

// DataTiers adds data tiers to the manifest.
func (w *PluginWrapper) DataTiers(tiers ...v1alpha1.DataTier) *PluginWrapper {
	w.Spec.Manifest.DataTiers = append(w.Spec.Manifest.DataTiers, tiers...)
	return w
}

// ConfigSchema sets the manifest's config schema to the JSON document s.
func (w *PluginWrapper) ConfigSchema(s string) *PluginWrapper {
	w.Spec.Manifest.ConfigSchema = rawJSON(s)
	return w
}

// Config sets the instance's config to the JSON document s.
func (w *PluginWrapper) Config(s string) *PluginWrapper {
	w.Spec.Config = rawJSON(s)
	return w
}

// Obj returns a copy of the Plugin built so far.
func (w *PluginWrapper) Obj() *v1alpha1.Plugin { return w.DeepCopy() }

// GrantWrapper builds a v1alpha1.PluginGrant for a test fluently:
// MakeGrant(name).Capabilities(...).Egress(...).Obj().
type GrantWrapper struct{ v1alpha1.PluginGrant }

// MakeGrant starts an empty PluginGrant in the openfief namespace.
func MakeGrant(name string) *GrantWrapper {
	return &GrantWrapper{v1alpha1.PluginGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plugins.Namespace}}}
}

// GrantFor starts a PluginGrant that approves exactly what p's manifest asks
// for, each Secret slot bound to the Secret of its own name.
func GrantFor(p *v1alpha1.Plugin) *GrantWrapper {
	m := p.Spec.Manifest
	w := MakeGrant(p.Name).Capabilities(m.Capabilities...).DataTiers(m.DataTiers...)
	for _, h := range m.Egress {
		w.Egress(string(h))
	}
	for _, s := range m.Secrets {
		w.Secret(s.Name, "")
	}
	return w
}

// Capabilities replaces the approved capabilities.
func (w *GrantWrapper) Capabilities(caps ...v1alpha1.Capability) *GrantWrapper {
	w.Spec.Capabilities = append([]v1alpha1.Capability(nil), caps...)
	return w
}

// Egress adds approved egress hosts.
func (w *GrantWrapper) Egress(hosts ...string) *GrantWrapper {
	for _, h := range hosts {
		w.Spec.Egress = append(w.Spec.Egress, v1alpha1.EgressHost(h))
	}
	return w
}

// OwnerEgress adds hosts of the owner's choosing.
func (w *GrantWrapper) OwnerEgress(hosts ...string) *GrantWrapper {
	for _, h := range hosts {
		w.Spec.OwnerEgress = append(w.Spec.OwnerEgress, v1alpha1.EgressHost(h))
	}
	return w
}

// Secret approves the Secret slot name, bound to the owner's Secret
// secretName ("" mounts the Secret of the slot's own name).
func (w *GrantWrapper) Secret(name, secretName string) *GrantWrapper {
	w.Spec.Secrets = append(w.Spec.Secrets, v1alpha1.SecretGrant{Name: name, SecretName: secretName})
	return w
}

// PullSecrets adds image pull Secrets the grant names.
func (w *GrantWrapper) PullSecrets(names ...string) *GrantWrapper {
	w.Spec.ImagePullSecrets = append(w.Spec.ImagePullSecrets, names...)
	return w
}

// DataTiers adds approved data tiers.
func (w *GrantWrapper) DataTiers(tiers ...v1alpha1.DataTier) *GrantWrapper {
	w.Spec.DataTiers = append(w.Spec.DataTiers, tiers...)
	return w
}

// Obj returns a copy of the PluginGrant built so far.
func (w *GrantWrapper) Obj() *v1alpha1.PluginGrant { return w.DeepCopy() }

func rawJSON(s string) *apiextensionsv1.JSON {
	return &apiextensionsv1.JSON{Raw: json.RawMessage(s)}
}
