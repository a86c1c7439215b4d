package trust

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/catalog"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

// NewPolicy builds the trust policy (D-45): OpenFief's CI, every publisher in
// the embedded catalog (D-43), and the owner's signers from ownerSigners, the
// content of a signers.json file. Nil or empty ownerSigners adds no owner
// signer. No option skips the signature check (D-57).
func NewPolicy(ownerSigners []byte) (plugins.TrustPolicy, error) {
	cat, err := catalog.Load()
	if err != nil {
		return plugins.TrustPolicy{}, fmt.Errorf("embedded catalog: %w", err)
	}
	return NewPolicyWithCatalog(cat, ownerSigners)
}

// NewPolicyWithCatalog is NewPolicy with another catalog than the binary's:
// the CLI checks images with the catalog of the installed release, which
// its own binary may not hold (OF-30). The operator never uses it.
func NewPolicyWithCatalog(cat plugins.Catalog, ownerSigners []byte) (plugins.TrustPolicy, error) {
	var (
		owner []plugins.Signer
		err   error
	)
	if len(ownerSigners) > 0 {
		if owner, err = plugins.ParseOwnerSigners(ownerSigners); err != nil {
			return plugins.TrustPolicy{}, err
		}
	}
	return plugins.NewTrustPolicy(cat, owner)
}

// LoadPolicy builds the trust policy with the owner's signers read from
// signersFile, as the operator does once at start when --trusted-signers
// names a file. A missing file adds no signer; an unreadable or invalid one
// is an error, and the operator refuses to start.
func LoadPolicy(signersFile string) (plugins.TrustPolicy, error) {
	var data []byte
	if signersFile != "" {
		var err error
		data, err = os.ReadFile(signersFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			data = nil
		case err != nil:
			return plugins.TrustPolicy{}, fmt.Errorf("read trusted signers: %w", err)
		}
	}
	p, err := NewPolicy(data)
	if err != nil && len(data) > 0 {
		return plugins.TrustPolicy{}, fmt.Errorf("trusted signers %s: %w", signersFile, err)
	}
	return p, err
}

// NewImageVerifier builds the registry adapter for policy: it verifies
// bundles signed with the policy's public keys as well as keyless ones, and
// reads an image's label only when a signer the policy trusts signed it
// (the label of an image no one trusts is never parsed: it is hostile input).
// opts add to or override those options.
func NewImageVerifier(policy plugins.TrustPolicy, opts ...cosign.Option) (*cosign.Verifier, error) {
	base := []cosign.Option{cosign.WithPublicKeys(policy.PublicKeys()), cosign.WithLabelGate(policy.TrustsAnySignature)}
	v, err := cosign.NewVerifier(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("image verifier: %w", err)
	}
	return v, nil
}
