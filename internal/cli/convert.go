package cli

import (
	"encoding/json"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// The CLI decides nothing itself: these functions translate between the
// resources and the domain's values, as the operator's convert.go does.

// manifestToAPI converts a signed label into spec.manifest, so the Plugin
// declares exactly what the image's signature covers (D-42).
func manifestToAPI(m plugins.Manifest) v1alpha1.Manifest {
	out := v1alpha1.Manifest{}
	for _, c := range m.Capabilities {
		out.Capabilities = append(out.Capabilities, v1alpha1.Capability(c))
	}
	for _, h := range m.Egress {
		out.Egress = append(out.Egress, v1alpha1.EgressHost(h))
	}
	for _, s := range m.Secrets {
		out.Secrets = append(out.Secrets, v1alpha1.SecretMount{Name: s.Name, MountPath: s.MountPath})
	}
	for _, t := range m.DataTiers {
		out.DataTiers = append(out.DataTiers, v1alpha1.DataTier(t))
	}
	if len(m.ConfigSchema) > 0 {
		out.ConfigSchema = &apiextensionsv1.JSON{Raw: append([]byte(nil), m.ConfigSchema...)}
	}
	return out
}

// manifestFromAPI converts spec.manifest (or a deployed version's) into the
// domain's Manifest.
func manifestFromAPI(m v1alpha1.Manifest) plugins.Manifest {
	out := plugins.Manifest{ConfigSchema: rawJSON(m.ConfigSchema)}
	for _, c := range m.Capabilities {
		out.Capabilities = append(out.Capabilities, plugins.Capability(c))
	}
	for _, h := range m.Egress {
		out.Egress = append(out.Egress, string(h))
	}
	for _, s := range m.Secrets {
		out.Secrets = append(out.Secrets, plugins.SecretMount{Name: s.Name, MountPath: s.MountPath})
	}
	for _, t := range m.DataTiers {
		out.DataTiers = append(out.DataTiers, string(t))
	}
	return out
}

// grantFromAPI converts a PluginGrant into the domain's Grant; nil stays nil
// (no grant approves nothing).
func grantFromAPI(g *v1alpha1.PluginGrant) *plugins.Grant {
	if g == nil {
		return nil
	}
	out := &plugins.Grant{Name: g.Name}
	for _, c := range g.Spec.Capabilities {
		out.Capabilities = append(out.Capabilities, plugins.Capability(c))
	}
	for _, h := range g.Spec.Egress {
		out.Egress = append(out.Egress, string(h))
	}
	for _, s := range g.Spec.Secrets {
		out.Secrets = append(out.Secrets, plugins.SecretGrant{Name: s.Name, SecretName: s.SecretName})
	}
	for _, t := range g.Spec.DataTiers {
		out.DataTiers = append(out.DataTiers, string(t))
	}
	return out
}

// grantToAPI converts a domain Grant into a PluginGrant's spec.
func grantToAPI(g plugins.Grant) v1alpha1.PluginGrantSpec {
	var out v1alpha1.PluginGrantSpec
	for _, c := range g.Capabilities {
		out.Capabilities = append(out.Capabilities, v1alpha1.Capability(c))
	}
	for _, h := range g.Egress {
		out.Egress = append(out.Egress, v1alpha1.EgressHost(h))
	}
	for _, s := range g.Secrets {
		out.Secrets = append(out.Secrets, v1alpha1.SecretGrant{Name: s.Name, SecretName: s.SecretName})
	}
	for _, t := range g.DataTiers {
		out.DataTiers = append(out.DataTiers, v1alpha1.DataTier(t))
	}
	return out
}

// rawJSON returns the bytes of an optional JSON field, nil when unset.
func rawJSON(j *apiextensionsv1.JSON) json.RawMessage {
	if j == nil || len(j.Raw) == 0 {
		return nil
	}
	return append(json.RawMessage(nil), j.Raw...)
}
