package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestCatalogFileOfAKeyRelease: a release signed with a key (make release
// KEY=...) signs its plugins.json with that key, which its own CLI knows as
// its catalog's publisher; a development CLI, which knows only OpenFief's
// CI, refuses the same file.
func TestCatalogFileOfAKeyRelease(t *testing.T) {
	im := newImages(t)
	key := cosigntest.NewKey(t)
	fx := im.reg.PushImage(t, "openfief/nbp-fx", cosigntest.ManifestLabel(t, fxV1))
	im.reg.Sign(t, fx, key)
	file := catalogJSON(t, fx, plugins.Signer{Name: "openfief-test", Kind: plugins.SignerPublisher, Identity: plugins.SignerIdentity{PublicKeyPEM: key.PublicKeyPEM(t)}})
	path := filepath.Join(t.TempDir(), "plugins.json")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+plugins.CatalogSignatureSuffix, catalogBundle(t, key, file), 0o600); err != nil {
		t.Fatal(err)
	}

	r := openfief(t, nil, runOpts{builtinCatalog: file}, "plugin", "verify", fx.String(), "--catalog-file", path)
	expect(t, r, ExitOK, "Result:     Verified", "catalog of release v1.2.0 from "+path+", signed by openfief-test")
	// Without the file, the release's CLI says the same from its own catalog.
	r = openfief(t, nil, runOpts{builtinCatalog: file}, "plugin", "verify", fx.String())
	expect(t, r, ExitOK, "Result:     Verified", "this CLI's built-in catalog, of release "+testRelease)

	r = openfief(t, nil, runOpts{}, "plugin", "verify", fx.String(), "--catalog-file", path)
	expect(t, r, ExitUntrustedSigner, "--catalog-file", "does not verify")
}
