package plugins

// FirstDifference names the first field, in the manifest's own order, in
// which m and o ask for different things as Equal judges them
// ("capabilities", "egress", "ownerEgress", "secrets", "dataTiers",
// "configSchema", "resources"), or "" when they are Equal. A person told
// that an image's label is not their manifest then knows where to look.
func (m Manifest) FirstDifference(o Manifest) string {
	switch {
	case !sameSet(m.Capabilities, o.Capabilities):
		return "capabilities"
	case !sameEgress(m.Egress, o.Egress):
		return "egress"
	case m.OwnerEgress != o.OwnerEgress:
		return "ownerEgress"
	case !sameSet(m.Secrets, o.Secrets):
		return "secrets"
	case !sameSet(m.DataTiers, o.DataTiers):
		return "dataTiers"
	case !sameDocument(m.ConfigSchema, o.ConfigSchema):
		return "configSchema"
	case !sameResources(m.Resources, o.Resources):
		return "resources"
	}
	return ""
}

// sameEgress compares host lists as Equal does: canonical forms as sets,
// false when either does not canonicalise.
func sameEgress(a, b []string) bool {
	ah, ok := canonicalHostSet(a)
	if !ok {
		return false
	}
	bh, ok := canonicalHostSet(b)
	return ok && sameKeys(ah, bh)
}
