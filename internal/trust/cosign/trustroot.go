package cosign

import (
	_ "embed"
	"fmt"

	"github.com/sigstore/sigstore-go/pkg/root"
)

// publicGoodRoot is the Sigstore public-good instance's trusted_root.json;
// trusted_root.json.SOURCE records where it came from and its sha256.
//
//go:embed trusted_root.json
var publicGoodRoot []byte

// PublicGoodTrustedRoot parses the embedded trust root of the Sigstore
// public-good instance: its Fulcio CAs, Rekor v1 and v2 logs, CT logs and
// timestamp authority. The verifier checks keyless bundles against it
// offline, without calling Sigstore's servers (D-17, D-56).
func PublicGoodTrustedRoot() (*root.TrustedRoot, error) {
	tr, err := root.NewTrustedRootFromJSON(publicGoodRoot)
	if err != nil {
		return nil, fmt.Errorf("parse embedded public-good trusted root: %w", err)
	}
	return tr, nil
}
