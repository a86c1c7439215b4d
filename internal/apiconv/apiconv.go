// Package apiconv translates between the openfief.io/v1alpha1 resources and
// the domain's values in internal/plugins. The operator and the CLI decide
// nothing themselves: they convert with this package, ask the domain, and
// convert the answer back.
package apiconv

import (
	"encoding/json"
	"math"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// ManifestFromAPI converts a CRD manifest into the domain's Manifest.
func ManifestFromAPI(m v1alpha1.Manifest) plugins.Manifest {
	out := plugins.Manifest{
		Capabilities: make([]plugins.Capability, 0, len(m.Capabilities)),
		ConfigSchema: RawJSON(m.ConfigSchema),
		OwnerEgress:  int(m.OwnerEgress),
		Resources:    ResourcesFromAPI(m.Resources),
	}
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

// ManifestToAPI converts a domain Manifest into the CRD shape.
func ManifestToAPI(m plugins.Manifest) v1alpha1.Manifest {
	out := v1alpha1.Manifest{OwnerEgress: ownerSlotsToAPI(m.OwnerEgress), Resources: ResourcesToAPI(m.Resources)}
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

// ownerSlotsToAPI converts a manifest's owner egress slots to the CRD's
// int32. A count int32 cannot hold becomes -1, which the CRD and the domain
// refuse, rather than wrapping around to a count that looks valid.
func ownerSlotsToAPI(n int) int32 {
	if n < math.MinInt32 || n > math.MaxInt32 {
		return -1
	}
	return int32(n)
}

// PluginFromAPI converts a Plugin resource into the domain's Plugin.
func PluginFromAPI(p *v1alpha1.Plugin) plugins.Plugin {
	return plugins.Plugin{
		Name:     p.Name,
		Image:    p.Spec.Image,
		Manifest: ManifestFromAPI(p.Spec.Manifest),
		Config:   RawJSON(p.Spec.Config),
	}
}

// GrantFromAPI converts a PluginGrant resource into the domain's Grant.
func GrantFromAPI(g *v1alpha1.PluginGrant) plugins.Grant {
	out := plugins.Grant{Name: g.Name}
	for _, c := range g.Spec.Capabilities {
		out.Capabilities = append(out.Capabilities, plugins.Capability(c))
	}
	for _, h := range g.Spec.Egress {
		out.Egress = append(out.Egress, string(h))
	}
	for _, h := range g.Spec.OwnerEgress {
		out.OwnerEgress = append(out.OwnerEgress, string(h))
	}
	for _, s := range g.Spec.Secrets {
		out.Secrets = append(out.Secrets, plugins.SecretGrant{Name: s.Name, SecretName: s.SecretName})
	}
	for _, t := range g.Spec.DataTiers {
		out.DataTiers = append(out.DataTiers, string(t))
	}
	out.ImagePullSecrets = slices.Clone(g.Spec.ImagePullSecrets)
	out.Resources = ResourcesFromAPI(g.Spec.Resources)
	return out
}

// PendingToAPI converts what waits for approval into status.pendingApproval;
// nil when nothing is pending.
func PendingToAPI(p plugins.Pending) *v1alpha1.PendingApproval {
	if p.IsEmpty() {
		return nil
	}
	out := &v1alpha1.PendingApproval{Egress: p.Egress, Secrets: p.Secrets, DataTiers: p.DataTiers, Resources: ResourcesToAPI(p.Resources)}
	for _, c := range p.Capabilities {
		out.Capabilities = append(out.Capabilities, v1alpha1.Capability(c))
	}
	return out
}

// EffectiveToAPI converts the running version's permissions into status.effective.
func EffectiveToAPI(e *plugins.EffectivePermissions) *v1alpha1.EffectivePermissions {
	if e == nil {
		return nil
	}
	l := e.Resources()
	out := &v1alpha1.EffectivePermissions{Egress: e.Egress(), DataTiers: e.DataTiers(), Resources: &v1alpha1.Resources{
		Memory: v1alpha1.MemoryQuantity(plugins.FormatMemory(l.MemoryBytes)),
		CPU:    v1alpha1.CPUQuantity(plugins.FormatCPU(l.CPUMilli)),
		Tmp:    v1alpha1.MemoryQuantity(plugins.FormatMemory(l.TmpBytes)),
	}}
	for _, c := range e.Capabilities() {
		out.Capabilities = append(out.Capabilities, v1alpha1.Capability(c))
	}
	for _, s := range e.Secrets() {
		out.Secrets = append(out.Secrets, v1alpha1.GrantedSecret{Name: s.Slot, SecretName: s.SecretName, MountPath: s.MountPath})
	}
	return out
}

// RawJSON returns the bytes of an optional JSON field, nil when unset.
func RawJSON(j *apiextensionsv1.JSON) json.RawMessage {
	if j == nil || len(j.Raw) == 0 {
		return nil
	}
	return append(json.RawMessage(nil), j.Raw...)
}

// GrantToAPI converts a domain Grant into a PluginGrant's spec.
func GrantToAPI(g plugins.Grant) v1alpha1.PluginGrantSpec {
	var out v1alpha1.PluginGrantSpec
	for _, c := range g.Capabilities {
		out.Capabilities = append(out.Capabilities, v1alpha1.Capability(c))
	}
	for _, h := range g.Egress {
		out.Egress = append(out.Egress, v1alpha1.EgressHost(h))
	}
	for _, h := range g.OwnerEgress {
		out.OwnerEgress = append(out.OwnerEgress, v1alpha1.EgressHost(h))
	}
	for _, s := range g.Secrets {
		out.Secrets = append(out.Secrets, v1alpha1.SecretGrant{Name: s.Name, SecretName: s.SecretName})
	}
	for _, t := range g.DataTiers {
		out.DataTiers = append(out.DataTiers, v1alpha1.DataTier(t))
	}
	out.ImagePullSecrets = slices.Clone(g.ImagePullSecrets)
	out.Resources = ResourcesToAPI(g.Resources)
	return out
}

// ResourcesFromAPI converts optional CRD resources into the domain's, the
// text kept as written: the domain parses and bounds it.
func ResourcesFromAPI(r *v1alpha1.Resources) plugins.Resources {
	if r == nil {
		return plugins.Resources{}
	}
	return plugins.Resources{Memory: string(r.Memory), CPU: string(r.CPU), Tmp: string(r.Tmp)}
}

// ResourcesToAPI converts the domain's resources into the CRD shape; nil
// when they name nothing.
func ResourcesToAPI(r plugins.Resources) *v1alpha1.Resources {
	if r.IsZero() {
		return nil
	}
	return &v1alpha1.Resources{Memory: v1alpha1.MemoryQuantity(r.Memory), CPU: v1alpha1.CPUQuantity(r.CPU), Tmp: v1alpha1.MemoryQuantity(r.Tmp)}
}
