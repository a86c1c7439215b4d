package plugins

import (
	"slices"
)

// SecretPurge is what `openfief plugin uninstall --purge` does with the
// Secrets of one plugin instance (D-58): the Secrets it deletes and those it
// keeps, with why. Both are sorted by Secret name.
type SecretPurge struct {
	// Delete lists the Secrets only the purged instance's grant binds.
	Delete []string
	// Keep lists the Secrets that grant binds and other grants bind too.
	Keep []KeptSecret
}

// KeptSecret is a Secret purge keeps and why: the other plugin instances
// whose grants bind it.
type KeptSecret struct {
	// Secret is the kept Secret's name.
	Secret string
	// BoundBy names the other instances whose grants bind Secret, sorted.
	BoundBy []string
}

// PurgeSecrets decides which Secrets purging the instance target.Name
// deletes (D-58): exactly the Secrets its grant binds (each granted slot's
// bound Secret, or the Secret named like the slot when unbound, as the
// operator mounts them, OF-1) that no grant in others binds. A Secret the
// manifest only requests is never deleted: a vendor names slots, and a slot
// named like another component's Secret must not make purge delete it.
// Names that are not Secret names name no Secret and
// are left out; a grant in others named like target is target itself and is
// skipped.
func PurgeSecrets(target Grant, others []Grant) SecretPurge {
	boundBy := map[string][]string{}
	for _, g := range others {
		if g.Name == target.Name {
			continue
		}
		for _, s := range g.Secrets {
			if secret := s.Secret(); !slices.Contains(boundBy[secret], g.Name) {
				boundBy[secret] = append(boundBy[secret], g.Name)
			}
		}
	}
	own := map[string]bool{}
	for _, s := range target.Secrets {
		if secret := s.Secret(); isDNSSubdomain(secret) {
			own[secret] = true
		}
	}
	var p SecretPurge
	for _, secret := range sortedKeys(own) {
		users := boundBy[secret]
		if len(users) == 0 {
			p.Delete = append(p.Delete, secret)
			continue
		}
		slices.Sort(users)
		p.Keep = append(p.Keep, KeptSecret{Secret: secret, BoundBy: users})
	}
	return p
}
