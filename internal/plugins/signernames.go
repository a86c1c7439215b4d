package plugins

import (
	"fmt"
	"strings"
	"unicode"
)

// A trusted signer's name is what the CLI and the dashboard show for a
// signature, and what the operator records as the signer of an admitted
// image; the dashboard finds the signer's kind and identity by it. So a name
// names one signer of one kind (D-45): no two trusted signers share a name,
// whatever their kinds, and names that differ only in letter case count as
// the same name. OpenFief's own names are reserved: an owner signer may not
// be called "openfief" or anything starting with "openfief-", in any case,
// so no owner key can be shown as OpenFief's CI (OpenFiefCI, "openfief-ci")
// or as the publisher of OpenFief's release catalog ("openfief").
const (
	// ReservedSignerName is the name reserved for OpenFief's release
	// publisher; no owner signer may take it.
	ReservedSignerName = "openfief"
	// ReservedSignerPrefix starts every other name reserved for OpenFief's
	// own signers, such as OpenFiefCI's "openfief-ci".
	ReservedSignerPrefix = ReservedSignerName + "-"
)

// signerNameKey is the form two signer names are compared in: each rune
// replaced by the smallest rune of its case-folding orbit (the equivalence
// strings.EqualFold uses), so "OpenFief-CI" and "openfief-ci" have one key.
func signerNameKey(name string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, name)
}

// checkReservedSignerName refuses a name reserved for OpenFief's own signers
// when a signer takes it: OpenFiefCI's name for anyone but the CI (which a
// keyless release names as its catalog's publisher, with the CI's own
// identity: the same signer), and ReservedSignerName or any name starting
// ReservedSignerPrefix for an owner signer. Names are compared with
// signerNameKey.
func checkReservedSignerName(s Signer) error {
	name, kind := s.Name, s.Kind
	key := signerNameKey(name)
	switch {
	case kind == SignerOpenFiefCI, isCIPublisher(s):
		return nil
	case key == signerNameKey(OpenFiefCI().Name):
		return fmt.Errorf("%q is reserved for OpenFief's CI signer", name)
	case kind != SignerOwner:
		return nil
	case key == signerNameKey(ReservedSignerName) || strings.HasPrefix(key, signerNameKey(ReservedSignerPrefix)):
		return fmt.Errorf("%q is reserved: %q and names starting %q, in any case, are OpenFief's own signers'; choose another name",
			name, ReservedSignerName, ReservedSignerPrefix)
	}
	return nil
}

// isCIPublisher reports whether s is OpenFief's CI named as a catalog's
// publisher: its name and exact identity.
func isCIPublisher(s Signer) bool {
	ci := OpenFiefCI()
	return s.Kind == SignerPublisher && signerNameKey(s.Name) == signerNameKey(ci.Name) && s.Identity == ci.Identity
}

// signerNames finds signers that share a name (by signerNameKey) across
// every kind, remembering where each name was first seen.
type signerNames map[string]signerSeen

type signerSeen struct {
	field    string
	kind     SignerKind
	identity SignerIdentity
}

// add records s at field and reports the problem when an earlier signer
// already has its name; a signer of the same identity named at two places
// of the catalog is one signer, and the caller adds it once.
func (n signerNames) add(s Signer, field string) error {
	if s.Name == "" {
		return nil
	}
	key := signerNameKey(s.Name)
	if first, dup := n[key]; dup {
		if first.kind == SignerOpenFiefCI && isCIPublisher(s) && first.identity == s.Identity {
			return nil // the CI publishing a keyless release's catalog: one signer
		}
		return fmt.Errorf("%q is already the name of %s (%s); a signer's name is unique across OpenFief's CI, the catalog's publishers and the owner's signers, whatever its case",
			s.Name, kindPhrase(first.kind), first.field)
	}
	n[key] = signerSeen{field: field, kind: s.Kind, identity: s.Identity}
	return nil
}

// kindPhrase names a kind of signer in an error.
func kindPhrase(k SignerKind) string {
	switch k {
	case SignerOpenFiefCI:
		return "OpenFief's CI signer"
	case SignerPublisher:
		return "a catalog publisher"
	case SignerOwner:
		return "another owner signer"
	}
	return "another signer"
}
