package plugins

// Pending is exactly what a manifest requests beyond its grant: what waits for
// the owner's approval (D-16). The operator writes it to
// status.pendingApproval and the CLI shows it. Every list is sorted and nil
// when nothing of that kind is pending.
type Pending struct {
	// Capabilities requested but not granted.
	Capabilities []Capability
	// Egress hosts requested but not granted, canonical "host:port".
	Egress []string
	// Secrets lists the manifest's Secret slots the grant does not approve.
	Secrets []string
	// DataTiers requested but not granted.
	DataTiers []string
	// Resources are the manifest's quantities above what the grant
	// approves (the defaults without one), written canonically; the other
	// dimensions are empty.
	Resources Resources
}

// NeedsApproval returns what m requests that g does not approve (D-16). A nil
// grant approves nothing, so everything requested is pending. Egress hosts are
// compared in canonical form, and a requested host the grant lists among the
// owner's hosts is granted (OF-36); entries that do not canonicalise belong to an
// invalid manifest, which never runs, and are left out. A resource is pending
// when the manifest asks for more than the grant approves, or than the
// default without a grant.
func NeedsApproval(m Manifest, g *Grant) Pending {
	if g == nil {
		g = &Grant{}
	}
	slots := make([]string, 0, len(m.Secrets))
	for _, s := range m.Secrets {
		slots = append(slots, s.Name)
	}
	granted := make([]string, 0, len(g.Secrets))
	for _, s := range g.Secrets {
		granted = append(granted, s.Name)
	}
	return Pending{
		Capabilities: subtract(m.Capabilities, g.Capabilities),
		Egress:       subtract(canonicalHosts(m.Egress), grantedHosts(g)),
		Secrets:      subtract(slots, granted),
		DataTiers:    subtract(m.DataTiers, g.DataTiers),
		Resources:    pendingResources(m.Resources, g.Resources),
	}
}

// IsEmpty reports whether nothing is pending: the grant approves everything
// the manifest requests.
func (p Pending) IsEmpty() bool {
	return len(p.Capabilities) == 0 && len(p.Egress) == 0 && len(p.Secrets) == 0 && len(p.DataTiers) == 0 &&
		p.Resources.IsZero()
}

// String reads, for a person, "capabilities: view; egress: api.example.com:443;
// secrets: creds; data tiers: raw; resources: memory 512Mi", leaving out
// empty kinds, or "nothing" when nothing is pending.
func (p Pending) String() string {
	lists := describeLists(p.Capabilities, p.Egress, p.Secrets, p.DataTiers)
	if p.Resources.IsZero() {
		return lists
	}
	res := "resources: " + describeResources(p.Resources)
	if lists == "nothing" {
		return res
	}
	return lists + "; " + res
}
