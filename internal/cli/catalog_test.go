//go:build cluster

package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestCatalogInstall runs the CLI of a release whose catalog, linked into
// it as into that release's operator, has two entries published by a
// release key: nbp-fx, signed by that key, and ibkr-flex, whose pinned
// image only an owner key signed. `catalog list` shows the first Verified
// and says why the second is not; `plugin install --catalog` installs the
// first by name and refuses the second although its signer is trusted: the
// owner asked for the plugin the catalog vouches for.
func TestCatalogInstall(t *testing.T) {
	k := newKube(t)
	im := newImages(t)
	release := cosigntest.NewKey(t)
	fx := im.reg.PushImage(t, "openfief/nbp-fx", cosigntest.ManifestLabel(t, fxV1))
	im.reg.Sign(t, fx, release)
	other := im.signed(t, "openfief/ibkr-flex", fxV1) // the owner's key, not the publisher's

	catalogJSON, err := json.Marshal(map[string]any{"plugins": []any{
		map[string]any{"name": "nbp-fx", "image": fx.String(), "publisher": map[string]string{"name": "openfief-test", "publicKey": release.PublicKeyPEM(t)}},
		map[string]any{"name": "ibkr-flex", "image": other.String(), "publisher": map[string]string{"name": "openfief-test", "publicKey": release.PublicKeyPEM(t)}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	rel := runOpts{builtinCatalog: catalogJSON}

	t.Run("list", func(t *testing.T) {
		r := openfief(t, k, rel, "catalog", "list", "--signers", im.signers)
		expect(t, r, ExitOK, "this CLI's built-in catalog, of release "+testRelease, "NAME", "ASKS FOR")
		lines := strings.Split(r.out, "\n")
		if len(lines) < 3 || !strings.Contains(lines[1], "nbp-fx") || !strings.Contains(lines[1], "Verified") ||
			!strings.Contains(lines[1], "connector; egress api.nbp.pl:443") || !strings.Contains(lines[1], testRelease) {
			t.Errorf("nbp-fx's row: %q", lines)
		}
		if !strings.Contains(lines[2], "ibkr-flex") || !strings.Contains(lines[2], "SignedByTrustedSigner") {
			t.Errorf("ibkr-flex's row: %q", lines)
		}

		r = openfief(t, k, rel, "catalog", "list", "-o", "json", "--signers", im.signers)
		expect(t, r, ExitOK)
		var l catalogListing
		if err := json.Unmarshal([]byte(r.out), &l); err != nil {
			t.Fatalf("%v\n%s", err, r.out)
		}
		if l.Version != testRelease || len(l.Plugins) != 2 || l.Plugins[0].Status != v1alpha1.ReasonVerified ||
			l.Plugins[0].Manifest == nil || !l.Plugins[0].Manifest.Equal(fxV1) || l.Plugins[1].Manifest != nil {
			t.Errorf("catalog list -o json: %+v", l)
		}
	})

	t.Run("install by name", func(t *testing.T) {
		r := openfief(t, k, rel, "plugin", "install", "fx-catalog", "--catalog", "nbp-fx", "--config", tempFile(t, "c.yaml", fxConfig), "--signers", im.signers)
		expect(t, r, ExitOK, "plugin/fx-catalog created", "Verified by openfief-test")
		p := k.plugin(t, "fx-catalog")
		if p == nil || p.Spec.Image != fx.String() {
			t.Fatalf("Plugin %+v, want the image the catalog pins, %s", p, fx)
		}
		t.Cleanup(func() { _ = k.c.Delete(context.Background(), p) })
	})

	t.Run("not verified by its publisher", func(t *testing.T) {
		r := openfief(t, k, rel, "plugin", "install", "ibkr-catalog", "--catalog", "ibkr-flex", "--config", tempFile(t, "c.yaml", fxConfig), "--signers", im.signers)
		expect(t, r, ExitUntrustedSigner, "--catalog ibkr-flex", "not Verified by openfief-test")
		if k.plugin(t, "ibkr-catalog") != nil {
			t.Error("a Plugin was written for a catalog entry its publisher did not sign")
		}
	})

	t.Run("usage", func(t *testing.T) {
		r := openfief(t, k, rel, "plugin", "install", "x", "--catalog", "nope", "--signers", im.signers)
		expect(t, r, ExitNotFound, "--catalog nope: no such entry in this CLI's built-in catalog, of release "+testRelease, "it lists nbp-fx, ibkr-flex")
		if strings.Contains(r.out+r.errOut, "the this") {
			t.Errorf("the message reads \"the this\":\n%s", r)
		}
		r = openfief(t, k, rel, "plugin", "install", "x", "--catalog", "nbp-fx", "--image", fx.String())
		expect(t, r, ExitUsage, "exactly one of --image IMAGE and --catalog ENTRY")
		r = openfief(t, k, rel, "plugin", "install", "x")
		expect(t, r, ExitUsage, "exactly one of --image IMAGE and --catalog ENTRY")
	})
}
