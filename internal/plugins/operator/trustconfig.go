package operator

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/plugins/catalog"
)

// DefaultSignersFile is where the optional openfief-trusted-signers ConfigMap
// is mounted.
const DefaultSignersFile = "/etc/openfief/trust/signers.json"

// LoadTrustPolicy builds the trust policy once at start (D-45): OpenFief's CI,
// every publisher in the embedded catalog, and the owner's signers from
// signersFile. A missing file adds no signer; an unreadable or invalid one is
// an error, and the operator refuses to start. No setting skips the check
// (D-57).
func LoadTrustPolicy(signersFile string) (plugins.TrustPolicy, error) {
	cat, err := catalog.Load()
	if err != nil {
		return plugins.TrustPolicy{}, fmt.Errorf("embedded catalog: %w", err)
	}
	var owner []plugins.Signer
	if signersFile != "" {
		data, err := os.ReadFile(signersFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return plugins.TrustPolicy{}, fmt.Errorf("read trusted signers: %w", err)
		default:
			if owner, err = plugins.ParseOwnerSigners(data); err != nil {
				return plugins.TrustPolicy{}, fmt.Errorf("trusted signers %s: %w", signersFile, err)
			}
		}
	}
	return plugins.NewTrustPolicy(cat, owner)
}
