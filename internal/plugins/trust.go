package plugins

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The refusals of TrustPolicy.Decide. No setting overrides them (D-57).
var (
	// ErrUnsigned: the image carries no signature that verified.
	ErrUnsigned = errors.New("image is not signed")
	// ErrUntrustedSigner: signatures verified, but none is by a trusted signer.
	ErrUntrustedSigner = errors.New("image is not signed by a trusted signer")
	// ErrManifestMismatch: the declared manifest is not the image's signed
	// label, or the image has no label to compare (D-42).
	ErrManifestMismatch = errors.New("declared manifest does not match the signed label")
)

// TrustLevel says how far an admitted image is trusted; the operator shows it
// in the SignatureVerified condition (D-56).
type TrustLevel string

// The trust levels of an admitted image (D-44, D-56).
const (
	// Verified: a catalog entry pins the image's digest and that entry's
	// publisher signed it (D-44).
	Verified TrustLevel = "Verified"
	// Unverified: a trusted signer signed it, but no catalog entry vouches for
	// this digest with this signer. It runs; it is shown as unverified.
	Unverified TrustLevel = "Unverified"
)

// Decision is what TrustPolicy.Decide admitted: how far the image is trusted,
// the trusted signer whose signature admitted it, the catalog entry when it is
// Verified, and the manifest read from its signed label.
type Decision struct {
	// Level is Verified or Unverified.
	Level TrustLevel
	// Signer is the trusted signer that signed the image: the catalog entry's
	// publisher when Verified, otherwise the first trusted signer, in the
	// policy's order (Signers), that signed it.
	Signer Signer
	// CatalogEntry is the entry that pins the digest when Level is Verified.
	CatalogEntry *CatalogEntry
	// Manifest is a copy of the image's signed label, nil when it has none.
	Manifest *Manifest
}

// TrustPolicy decides whether an image may run (D-45, D-57). It trusts
// OpenFief's CI, every catalog publisher and every owner signer, compiled
// once. Its fields are unexported: build one with NewTrustPolicy. The zero
// TrustPolicy trusts no one, so it admits nothing. A TrustPolicy is safe for
// concurrent use.
type TrustPolicy struct {
	catalog Catalog
	signers []compiledSigner
}

// NewTrustPolicy builds the policy the operator holds from start (D-45): it
// trusts OpenFiefCI(), every publisher in the catalog (for any image it
// signs) and every owner signer, in that order. An owner signer must be valid,
// of kind SignerOwner, and named neither with a name reserved for OpenFief
// nor with any other trusted signer's name, whatever its kind
// (signernames.go); otherwise the error wraps ErrInvalidSigner with paths
// such as "signers[1].subjectPattern", owner[i] being the owner's
// signers.json's signers[i].
func NewTrustPolicy(c Catalog, owner []Signer) (TrustPolicy, error) {
	p := TrustPolicy{catalog: c}
	var errs fieldErrors
	names := signerNames{}
	add := func(s Signer, field string) {
		cs, serrs := compileSigner(s, field)
		errs = append(errs, serrs...)
		if err := names.add(s, field); err != nil {
			errs.add(field+".name", ErrInvalidSigner, err.Error())
		}
		p.signers = append(p.signers, cs)
	}
	add(OpenFiefCI(), "openfiefCI")
	for i, s := range c.Publishers() {
		add(s, fmt.Sprintf("catalog.publishers[%d]", i))
	}
	for i, s := range owner {
		field := fmt.Sprintf("signers[%d]", i)
		if s.Kind != SignerOwner {
			errs.add(field+".kind", ErrInvalidSigner, fmt.Sprintf("%q, want %s", s.Kind, SignerOwner))
		}
		add(s, field)
	}
	if err := errs.err(); err != nil {
		return TrustPolicy{}, err
	}
	return p, nil
}

// Signers returns the trusted signers in the order Decide prefers them:
// OpenFief's CI, the catalog publishers, then the owner's.
func (p TrustPolicy) Signers() []Signer {
	out := make([]Signer, len(p.signers))
	for i, s := range p.signers {
		out[i] = s.signer
	}
	return out
}

// PublicKeys returns the PEM public keys of the key-form trusted signers,
// sorted and without repeats, so the cosign adapter knows which keys to try
// when a bundle carries no certificate.
func (p TrustPolicy) PublicKeys() []string {
	set := map[string]struct{}{}
	for _, s := range p.signers {
		if s.signer.Identity.IsKey() {
			set[s.signer.Identity.PublicKeyPEM] = struct{}{}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// Catalog returns the catalog the policy was built with.
func (p TrustPolicy) Catalog() Catalog { return p.catalog }

// Decide judges what an adapter found for one image (D-42, D-44, D-45, D-57).
// It returns ErrUnsigned when img has no verified signature and
// ErrUntrustedSigner when none is by a trusted signer. Otherwise the image is
// Verified when a catalog entry pins its digest (the registry does not count)
// and that entry's publisher signed it, and Unverified when only another
// trusted signer did. A signed label that does not validate is ErrInvalidLabel.
// When declared is not nil it must Equal the signed label, and an image with
// no label is ErrManifestMismatch too. Any error means the image must not run, and the
// Decision is then zero: nothing admits an unsigned image.
func (p TrustPolicy) Decide(img SignedImage, declared *Manifest) (Decision, error) {
	if img.Image.IsZero() {
		return Decision{}, fmt.Errorf("%w: the signed image names no digest", ErrInvalidImage)
	}
	if len(img.Signatures) == 0 {
		return Decision{}, fmt.Errorf("%w: no signature over %s verified", ErrUnsigned, img.Image.Digest())
	}
	sigs := make([]signatureForm, len(img.Signatures))
	for i, s := range img.Signatures {
		sigs[i] = readSignature(s)
	}
	signedBy := func(c compiledIdentity) bool {
		return slices.ContainsFunc(sigs, c.matches)
	}

	var d Decision
	if entry, ok := p.catalog.Lookup(img.Image); ok {
		for _, s := range p.signers {
			if s.signer == entry.Publisher && signedBy(s.id) {
				d = Decision{Level: Verified, Signer: s.signer, CatalogEntry: &entry}
				break
			}
		}
	}
	if d.Level == "" {
		for _, s := range p.signers {
			if signedBy(s.id) {
				d = Decision{Level: Unverified, Signer: s.signer}
				break
			}
		}
	}
	if d.Level == "" {
		return Decision{}, fmt.Errorf("%w: %s", ErrUntrustedSigner, describeSignatures(img.Signatures))
	}

	if img.Manifest != nil {
		if err := img.Manifest.Validate(); err != nil {
			return Decision{}, fmt.Errorf("%w: the image's %s label is invalid: %w", ErrInvalidLabel, ManifestLabel, err)
		}
		m := cloneManifest(*img.Manifest)
		d.Manifest = &m
	}
	if declared != nil {
		switch {
		case d.Manifest == nil:
			return Decision{}, fmt.Errorf("%w: the image has no %s label", ErrManifestMismatch, ManifestLabel)
		case !d.Manifest.Equal(*declared):
			return Decision{}, fmt.Errorf("%w: spec.manifest differs from the image's %s label", ErrManifestMismatch, ManifestLabel)
		}
	}
	return d, nil
}

// TrustsAnySignature reports whether a trusted signer made one of sigs. The
// registry adapter asks it before reading an image's label, so an image that
// no policy would admit costs no label parsing; Decide
// still makes the decision.
func (p TrustPolicy) TrustsAnySignature(sigs []SignatureIdentity) bool {
	for _, sig := range sigs {
		form := readSignature(sig)
		for _, s := range p.signers {
			if s.id.matches(form) {
				return true
			}
		}
	}
	return false
}

// describeSignatures names who signed, for the refusal's message. Issuers,
// subjects and public keys are public, never credentials.
func describeSignatures(sigs []SignatureIdentity) string {
	const most = 3
	var parts []string
	for i, s := range sigs {
		if i == most {
			parts = append(parts, fmt.Sprintf("and %d more", len(sigs)-most))
			break
		}
		switch {
		case s.PublicKeyPEM != "":
			parts = append(parts, "a public key")
		default:
			parts = append(parts, fmt.Sprintf("issuer %q subject %q", truncate(s.Issuer, 200), truncate(s.Subject, 200)))
		}
	}
	return "signed by " + strings.Join(parts, ", ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// cloneManifest copies m so a Decision shares no slice with its input.
func cloneManifest(m Manifest) Manifest {
	return Manifest{
		Capabilities: slices.Clone(m.Capabilities),
		Egress:       slices.Clone(m.Egress),
		Secrets:      slices.Clone(m.Secrets),
		DataTiers:    slices.Clone(m.DataTiers),
		ConfigSchema: slices.Clone(m.ConfigSchema),
		OwnerEgress:  m.OwnerEgress,
	}
}
