package plugins

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrGrantMismatch is returned when a grant names another plugin instance
// than the one it is applied to. Every instance has its own grant (D-48), so
// Effective refuses rather than lend one instance's approval to another.
var ErrGrantMismatch = errors.New("grant is for another plugin")

// SecretBinding is one granted Secret slot as the workload mounts it: the
// manifest's slot name, the Secret the owner bound to it (the slot's own name
// when the grant binds none, OF-1) and the manifest's mount path,
// so a vendor can move a mount without new approval (D-16).
type SecretBinding struct {
	// Slot is the Secret name the manifest asks for.
	Slot string
	// SecretName is the Secret that is mounted: the grant's binding or Slot.
	SecretName string
	// MountPath is where the manifest asks for the Secret's files.
	MountPath string
}

// EffectivePermissions is what a plugin may actually use: only what both its
// manifest requests and its grant approves (D-16), and the hosts of the
// owner's choosing that fill the manifest's owner egress slots (OF-36). Its fields are unexported
// and every accessor returns a copy, so the only way to obtain one is Effective
// and nothing downstream can widen it. Every list is sorted.
type EffectivePermissions struct {
	name         string
	capabilities []Capability
	egress       []string // canonical host:port
	secrets      []SecretBinding
	dataTiers    []string
	pullSecrets  []string // the grant's image pull Secrets, sorted
	resources    ResourceLimits
}

// Effective intersects a plugin's request with its grant (D-16): capabilities,
// egress hosts (compared in canonical form, CanonicalEgressHost) and data tiers
// present in both; Secret slots matched by slot name, keeping the manifest's
// mount path and mounting the Secret the grant binds, or the slot's own name
// (OF-1). A grant that approves more than requested adds nothing, with one
// exception the manifest asks for (OF-36): the grant's OwnerEgress hosts the
// manifest does not request are the owner's own, and are added to the egress
// hosts when there are at most the manifest's OwnerEgress of them. A
// requested host the grant lists in either list is granted. Resources are
// quantities rather than sets: per dimension, what the manifest asks for (the
// default when it asks for none) but no more than the grant approves, the
// default being approved without a grant.
//
// It returns ErrNoCapabilityGranted when no requested capability is granted,
// since such a plugin has nothing it may do; ErrTooManyOwnerHosts (in a
// *FieldError on "grant.ownerEgress" naming the count and the limit) when the
// owner's hosts outnumber the slots, rather than choosing among them; and
// ErrGrantMismatch when the grant names another plugin. Inputs are expected
// to be validated; invalid entries (such as a host that does not
// canonicalise) are dropped, never granted, and never cause a panic.
func Effective(p Plugin, g Grant) (EffectivePermissions, error) {
	if p.Name != g.Name {
		return EffectivePermissions{}, fmt.Errorf("%w: grant %q applied to plugin %q", ErrGrantMismatch, g.Name, p.Name)
	}
	m := p.Manifest
	requested := canonicalHosts(m.Egress)
	owner := OwnerHosts(m, &g)
	e := EffectivePermissions{
		name:         p.Name,
		capabilities: filter(intersect(m.Capabilities, g.Capabilities), knownCapability),
		egress:       union(intersect(requested, grantedHosts(&g)), owner),
		secrets:      bindSecrets(m.Secrets, g.Secrets),
		dataTiers:    filter(intersect(m.DataTiers, g.DataTiers), isDataTier),
		pullSecrets:  pullSecrets(g.ImagePullSecrets),
		resources:    effectiveLimits(m.Resources, g.Resources),
	}
	if len(e.capabilities) == 0 {
		return EffectivePermissions{}, fmt.Errorf("plugin %q: %w", p.Name, ErrNoCapabilityGranted)
	}
	if slots := m.OwnerSlots(); len(owner) > slots {
		return EffectivePermissions{}, fmt.Errorf("plugin %q: %w", p.Name, &FieldError{
			Field: "grant.ownerEgress", Err: ErrTooManyOwnerHosts,
			Detail: fmt.Sprintf("%d (%s), the manifest allows %d; remove %d from the grant",
				len(owner), strings.Join(owner, ", "), slots, len(owner)-slots),
		})
	}
	return e, nil
}

// OwnerHosts returns the hosts of the owner's choosing that g (nil: no
// grant) holds for a plugin with manifest m (OF-36): g's OwnerEgress hosts m
// does not request, canonical and sorted. They fill m's OwnerEgress slots;
// a requested host the owner listed fills none, being granted anyway.
func OwnerHosts(m Manifest, g *Grant) []string {
	if g == nil {
		return nil
	}
	return nilIfEmpty(subtract(canonicalHosts(g.OwnerEgress), canonicalHosts(m.Egress)))
}

// FreeOwnerSlots is how many more hosts of the owner's choosing g may hold
// for m: its slots less OwnerHosts, never below zero.
func FreeOwnerSlots(m Manifest, g *Grant) int {
	return max(m.OwnerSlots()-len(OwnerHosts(m, g)), 0)
}

// OwnerSlots is how many hosts of the owner's choosing m allows: its
// OwnerEgress, read as none when it is out of range (only for a manifest
// that failed validation).
func (m Manifest) OwnerSlots() int {
	if m.OwnerEgress < 0 || m.OwnerEgress > MaxOwnerEgress {
		return 0
	}
	return m.OwnerEgress
}

// grantedHosts is every host g lists, in its egress list or among the
// owner's hosts, canonical and sorted.
func grantedHosts(g *Grant) []string {
	return canonicalHosts(append(slices.Clone(g.Egress), g.OwnerEgress...))
}

// bindSecrets keeps the manifest's slots the grant approves, sorted by slot.
// The first occurrence of a repeated slot or grant entry wins, and a slot
// with an invalid name, Secret name or mount path is dropped; both only
// matter for input that failed validation.
func bindSecrets(slots []SecretMount, granted []SecretGrant) []SecretBinding {
	bound := make(map[string]string, len(granted))
	for _, s := range granted {
		if _, dup := bound[s.Name]; !dup {
			bound[s.Name] = s.SecretName
		}
	}
	var out []SecretBinding
	seen := map[string]bool{}
	for _, s := range slots {
		secretName, ok := bound[s.Name]
		if !ok || seen[s.Name] {
			continue
		}
		seen[s.Name] = true
		if secretName == "" {
			secretName = s.Name
		}
		if !isDNSSubdomain(s.Name) || !isDNSSubdomain(secretName) || checkMountPath(s.MountPath) != nil {
			continue
		}
		out = append(out, SecretBinding{Slot: s.Name, SecretName: secretName, MountPath: s.MountPath})
	}
	slices.SortFunc(out, func(a, b SecretBinding) int { return strings.Compare(a.Slot, b.Slot) })
	return out
}

// pullSecrets returns the grant's image pull Secrets sorted and de-duplicated,
// dropping a name that is no Secret name (only input that failed validation).
func pullSecrets(names []string) []string {
	set := map[string]struct{}{}
	for _, n := range names {
		if isDNSSubdomain(n) {
			set[n] = struct{}{}
		}
	}
	return nilIfEmpty(sortedKeys(set))
}

// Name is the plugin instance the permissions belong to.
func (e EffectivePermissions) Name() string { return e.name }

// Capabilities returns a sorted copy of the granted capabilities.
func (e EffectivePermissions) Capabilities() []Capability { return slices.Clone(e.capabilities) }

// HasCapability reports whether c is among the effective capabilities.
func (e EffectivePermissions) HasCapability(c Capability) bool {
	_, ok := slices.BinarySearch(e.capabilities, c)
	return ok
}

// Egress returns a sorted copy of the effective egress hosts, each canonical
// "host:port": exactly the plugin's allow-list (D-32).
func (e EffectivePermissions) Egress() []string { return slices.Clone(e.egress) }

// HasEgress reports whether any egress host is effective, which is what gives
// a plugin the egress token, proxy environment and proxy rule (D-63).
func (e EffectivePermissions) HasEgress() bool { return len(e.egress) > 0 }

// Secrets returns a copy of the granted Secret bindings, sorted by slot.
func (e EffectivePermissions) Secrets() []SecretBinding { return slices.Clone(e.secrets) }

// ImagePullSecrets returns a sorted copy of the Secrets the grant names for
// pulling the image. They are the owner's alone: the manifest cannot ask for
// them, and the operator only names them (D-29).
func (e EffectivePermissions) ImagePullSecrets() []string { return slices.Clone(e.pullSecrets) }

// DataTiers returns a sorted copy of the effective data tiers (P-33: names only).
func (e EffectivePermissions) DataTiers() []string { return slices.Clone(e.dataTiers) }

// IsZero reports whether e is the zero value, which Effective never returns
// without an error and which grants nothing.
func (e EffectivePermissions) IsZero() bool { return e.name == "" && len(e.capabilities) == 0 }

// Resources returns the plugin's memory, CPU and /tmp limits.
func (e EffectivePermissions) Resources() ResourceLimits { return e.resources }

// Equal reports whether e and o grant exactly the same to the same plugin, so
// an adapter can tell whether what runs must change.
func (e EffectivePermissions) Equal(o EffectivePermissions) bool {
	return e.name == o.name &&
		slices.Equal(e.capabilities, o.capabilities) &&
		slices.Equal(e.egress, o.egress) &&
		slices.Equal(e.secrets, o.secrets) &&
		slices.Equal(e.dataTiers, o.dataTiers) &&
		slices.Equal(e.pullSecrets, o.pullSecrets) &&
		e.resources == o.resources
}

// String summarises the permissions for logs and status messages. It names
// Secrets but never holds their contents.
func (e EffectivePermissions) String() string {
	secrets := make([]string, len(e.secrets))
	for i, s := range e.secrets {
		secrets[i] = s.Slot + "=" + s.SecretName + "@" + s.MountPath
	}
	out := fmt.Sprintf("%s: %s", e.name, describeLists(e.capabilities, e.egress, secrets, e.dataTiers))
	if e.resources != DefaultResourceLimits() {
		out += "; resources: " + e.resources.String()
	}
	return out
}

// describeLists renders the four permission lists as
// "capabilities: a, b; egress: ...; secrets: ...; data tiers: ...", leaving
// out empty ones, or "nothing" when all are empty.
func describeLists(caps []Capability, egress, secrets, tiers []string) string {
	var parts []string
	add := func(label string, items []string) {
		if len(items) > 0 {
			parts = append(parts, label+": "+strings.Join(items, ", "))
		}
	}
	capNames := make([]string, len(caps))
	for i, c := range caps {
		capNames[i] = string(c)
	}
	add("capabilities", capNames)
	add("egress", egress)
	add("secrets", secrets)
	add("data tiers", tiers)
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, "; ")
}
