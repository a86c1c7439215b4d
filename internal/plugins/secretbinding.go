package plugins

import (
	"fmt"
	"strings"
)

// Secret is the Secret a granted slot mounts: the one the grant binds, or the
// Secret named like the slot when it binds none (OF-1). The operator mounts
// exactly this name (Effective, Compile), and purge deletes by it (D-58).
func (s SecretGrant) Secret() string {
	if s.SecretName == "" {
		return s.Name
	}
	return s.SecretName
}

// secretNameFor is the SecretName a grant records for slot bound to secret:
// empty when secret is the slot's own name (or empty), so an unbound slot
// and a slot bound to its own name are written the same way.
func secretNameFor(slot, secret string) string {
	if secret == "" || secret == slot {
		return ""
	}
	return secret
}

// parseSecretBinding reads the owner's "SLOT" or "SLOT=SECRET" (OF-1) into a
// SecretGrant, SecretName empty when the slot's own Secret is meant. Both
// names must be Kubernetes Secret names; an error is a *FieldError for field
// wrapping ErrRequired (an empty slot or Secret) or ErrInvalidSecretName.
func parseSecretBinding(field, s string) (SecretGrant, error) {
	slot, secret, bound := strings.Cut(s, "=")
	switch {
	case slot == "":
		return SecretGrant{}, &FieldError{Field: field, Err: ErrRequired, Detail: "empty slot; write SLOT or SLOT=SECRET"}
	case bound && secret == "":
		return SecretGrant{}, &FieldError{Field: field, Err: ErrRequired, Detail: "empty Secret name; write SLOT or SLOT=SECRET"}
	case !isDNSSubdomain(slot):
		return SecretGrant{}, &FieldError{Field: field, Err: ErrInvalidSecretName, Detail: fmt.Sprintf("slot %q is not a Kubernetes Secret name", slot)}
	case bound && !isDNSSubdomain(secret):
		return SecretGrant{}, &FieldError{Field: field, Err: ErrInvalidSecretName, Detail: fmt.Sprintf("%q is not a Kubernetes Secret name", secret)}
	}
	return SecretGrant{Name: slot, SecretName: secretNameFor(slot, secret)}, nil
}
