package plugins

import (
	"errors"
	"strings"
)

// Sentinel errors. Every validation problem wraps one of these inside a
// *FieldError, so callers can test the rule with errors.Is and still show the
// field path to a person.
var (
	// ErrRequired: a field that must be set is empty.
	ErrRequired = errors.New("required")
	// ErrInvalidName: not a DNS label starting with a letter, or too long.
	ErrInvalidName = errors.New("invalid name")
	// ErrInvalidCapability: a capability other than connector or view.
	ErrInvalidCapability = errors.New("unknown capability")
	// ErrDuplicate: a list names the same entry twice.
	ErrDuplicate = errors.New("duplicate entry")
	// ErrInvalidEgressHost: not a canonical host[:port] the proxy can resolve.
	ErrInvalidEgressHost = errors.New("invalid egress host")
	// ErrInvalidSecretName: not a valid Kubernetes Secret name.
	ErrInvalidSecretName = errors.New("invalid secret name")
	// ErrInvalidMountPath: not absolute and clean, "/", overlapping another
	// mount, a reserved directory (/tmp, /var/run/secrets, /dev, /proc,
	// /sys), or hiding a system directory of the image (/etc, /usr ...).
	ErrInvalidMountPath = errors.New("invalid mount path")
	// ErrUnsafeText: text that is not valid UTF-8, holds a control
	// character (C0, DEL, C1), a bidirectional control or a line separator
	// (IsUnsafeRune), or is longer than its field allows. Such text could
	// rewrite what a terminal or a page shows the owner (OF-17).
	ErrUnsafeText = errors.New("unsafe text")
	// ErrInvalidDataTier: not 1 to 32 letters, digits, '-' or '_'.
	ErrInvalidDataTier = errors.New("invalid data tier")
	// ErrInvalidJSON: config or config schema is not a single JSON value.
	ErrInvalidJSON = errors.New("invalid JSON")
	// ErrInvalidImage: not repository@sha256:<64 lower-case hex> (D-17).
	ErrInvalidImage = errors.New("invalid image reference")
	// ErrUnknownSecret: a grant binds a Secret slot the request does not name.
	ErrUnknownSecret = errors.New("unknown secret slot")
	// ErrInvalidSigner: a signer identity is malformed.
	ErrInvalidSigner = errors.New("invalid signer")
	// ErrInvalidAllowList: an allow-list document is not in canonical form.
	ErrInvalidAllowList = errors.New("invalid allow-list")
	// ErrInvalidTokenKey: a ServiceAccount token key set holds something
	// other than RSA or EC public keys with key IDs.
	ErrInvalidTokenKey = errors.New("invalid signing key")
	// ErrInvalidCatalog: the catalog file cannot be read strictly.
	ErrInvalidCatalog = errors.New("invalid catalog")
	// ErrInvalidLabel: the signed manifest label cannot be read strictly.
	ErrInvalidLabel = errors.New("invalid manifest label")
	// ErrInvalidOwnerEgress: a manifest's ownerEgress is not a whole number
	// from 0 to MaxOwnerEgress (OF-36).
	ErrInvalidOwnerEgress = errors.New("invalid owner egress slots")
	// ErrInvalidResources: a resource quantity does not follow the grammar
	// (ParseMemory, ParseCPU) or lies outside the platform's bounds
	// (MinMemory to MaxMemory and so on; a grant's at least the default).
	ErrInvalidResources = errors.New("invalid resources")

	// ErrNoCapabilityGranted: no requested capability is granted, so the
	// plugin has nothing it may do and does not run.
	ErrNoCapabilityGranted = errors.New("no requested capability is granted")
	// ErrTooManyOwnerHosts: the grant's OwnerEgress names more hosts the
	// manifest does not request than the manifest's OwnerEgress slots allow,
	// as after an upgrade to a version with fewer slots. Effective refuses
	// the grant rather than pick some of them (OF-36).
	ErrTooManyOwnerHosts = errors.New("more hosts of the owner's choosing than the manifest allows")
)

// FieldError is one validation problem: the path of the field it concerns
// (such as "manifest.egress[1]"), what was wrong, and the rule it broke as a
// wrapped sentinel.
type FieldError struct {
	// Field is the dotted path of the offending field.
	Field string
	// Err is the sentinel of the rule that was broken.
	Err error
	// Detail says, for a person, what was wrong. It never holds a secret.
	Detail string
}

// Error reads "field: rule: detail".
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.Field)
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Unwrap returns the sentinel, for errors.Is.
func (e *FieldError) Unwrap() error { return e.Err }

// fieldErrors collects problems in the order found so Validate can return
// them all at once.
type fieldErrors []error

func (fe *fieldErrors) add(field string, sentinel error, detail string) {
	*fe = append(*fe, &FieldError{Field: field, Err: sentinel, Detail: detail})
}

func (fe fieldErrors) err() error {
	if len(fe) == 0 {
		return nil
	}
	return errors.Join(fe...)
}
