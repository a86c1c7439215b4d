//go:build cluster

package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestCatalogInstall installs a release's catalog as the release overlay
// does (ConfigMap openfief-release) with two entries published by a release
// key: nbp-fx, signed by that key, and ibkr-flex, whose pinned image only an
// owner key signed. `catalog list` shows the first Verified and says why
// the second is not; `plugin install --catalog` installs the first by name
// and refuses the second although its signer is trusted: the owner asked
// for the plugin the catalog vouches for.
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
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: deploy.ReleaseConfigMap, Namespace: plugins.Namespace, Labels: map[string]string{"app.kubernetes.io/version": "v9.8.7"}},
		Data:       map[string]string{deploy.ReleaseKeyCatalog: string(catalogJSON)},
	}
	ctx := context.Background()
	if err := k.c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.c.Delete(context.Background(), cm) })

	t.Run("list", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "catalog", "list", "--signers", im.signers)
		expect(t, r, ExitOK, "catalog of the installed release v9.8.7", "NAME", "ASKS FOR")
		lines := strings.Split(r.out, "\n")
		if len(lines) < 3 || !strings.Contains(lines[1], "nbp-fx") || !strings.Contains(lines[1], "Verified") ||
			!strings.Contains(lines[1], "connector; egress api.nbp.pl:443") || !strings.Contains(lines[1], "v9.8.7") {
			t.Errorf("nbp-fx's row: %q", lines)
		}
		if !strings.Contains(lines[2], "ibkr-flex") || !strings.Contains(lines[2], "SignedByTrustedSigner") {
			t.Errorf("ibkr-flex's row: %q", lines)
		}

		r = openfief(t, k, runOpts{}, "catalog", "list", "-o", "json", "--signers", im.signers)
		expect(t, r, ExitOK)
		var l catalogListing
		if err := json.Unmarshal([]byte(r.out), &l); err != nil {
			t.Fatalf("%v\n%s", err, r.out)
		}
		if l.Version != "v9.8.7" || len(l.Plugins) != 2 || l.Plugins[0].Status != v1alpha1.ReasonVerified ||
			l.Plugins[0].Manifest == nil || !l.Plugins[0].Manifest.Equal(fxV1) || l.Plugins[1].Manifest != nil {
			t.Errorf("catalog list -o json: %+v", l)
		}
	})

	t.Run("install by name", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "install", "fx-catalog", "--catalog", "nbp-fx", "--config", tempFile(t, "c.yaml", fxConfig), "--signers", im.signers)
		expect(t, r, ExitOK, "plugin/fx-catalog created", "Verified by openfief-test")
		p := k.plugin(t, "fx-catalog")
		if p == nil || p.Spec.Image != fx.String() {
			t.Fatalf("Plugin %+v, want the image the catalog pins, %s", p, fx)
		}
		t.Cleanup(func() { _ = k.c.Delete(context.Background(), p) })
	})

	t.Run("not verified by its publisher", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "install", "ibkr-catalog", "--catalog", "ibkr-flex", "--config", tempFile(t, "c.yaml", fxConfig), "--signers", im.signers)
		expect(t, r, ExitUntrustedSigner, "--catalog ibkr-flex", "not Verified by openfief-test")
		if k.plugin(t, "ibkr-catalog") != nil {
			t.Error("a Plugin was written for a catalog entry its publisher did not sign")
		}
	})

	t.Run("usage", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "install", "x", "--catalog", "nope", "--signers", im.signers)
		expect(t, r, ExitNotFound, "--catalog nope: no such entry", "it lists nbp-fx, ibkr-flex")
		r = openfief(t, k, runOpts{}, "plugin", "install", "x", "--catalog", "nbp-fx", "--image", fx.String())
		expect(t, r, ExitUsage, "exactly one of --image IMAGE and --catalog ENTRY")
		r = openfief(t, k, runOpts{}, "plugin", "install", "x")
		expect(t, r, ExitUsage, "exactly one of --image IMAGE and --catalog ENTRY")
	})
}
