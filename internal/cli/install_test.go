//go:build cluster

package cli

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestInstall checks `plugin install` writes a Plugin whose spec.manifest is
// the signed label and whose config matches its schema, and refuses, writing
// nothing, an unsigned image, a config the schema refuses and a taken name.
func TestInstall(t *testing.T) {
	k := newKube(t)
	im := newImages(t)
	signed := im.signed(t, "plugins/fx", fxV1)
	config := tempFile(t, "config.yaml", fxConfig)

	r := openfief(t, k, runOpts{}, "plugin", "install", "fx-install", "--image", signed.String(), "--config", config, "--signers", im.signers)
	expect(t, r, ExitOK, "plugin/fx-install created", "SignedByTrustedSigner by owner",
		"Egress:        api.nbp.pl:443", "Secrets:       fx-token at /etc/fx", "openfief plugin approve fx-install")
	p := k.plugin(t, "fx-install")
	if p == nil {
		t.Fatal("no Plugin written")
	}
	if p.Spec.Image != signed.String() {
		t.Errorf("spec.image %q, want %q", p.Spec.Image, signed)
	}
	if got := apiconv.ManifestFromAPI(p.Spec.Manifest); !got.Equal(fxV1) {
		t.Errorf("spec.manifest %+v is not the signed label %+v", got, fxV1)
	}
	if string(p.Spec.Config.Raw) != `{"currency":"PLN"}` {
		t.Errorf("spec.config %s", p.Spec.Config.Raw)
	}

	t.Run("name taken", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "install", "fx-install", "--image", signed.String(), "--config", config, "--signers", im.signers)
		expect(t, r, ExitNothingToDo, `plugin "fx-install" already exists`, "openfief plugin upgrade fx-install")
	})
	t.Run("unsigned image", func(t *testing.T) {
		unsigned := im.unsigned(t, "plugins/unsigned", fxV1)
		r := openfief(t, k, runOpts{}, "plugin", "install", "fx-unsigned", "--image", unsigned.String(), "--config", config, "--signers", im.signers)
		expect(t, r, ExitUnsigned, "image refused: Unsigned")
		if k.plugin(t, "fx-unsigned") != nil {
			t.Error("a Plugin was written for an unsigned image")
		}
	})
	t.Run("config not matching the schema", func(t *testing.T) {
		bad := tempFile(t, "bad.json", `{"currency":"zloty","extra":1}`)
		r := openfief(t, k, runOpts{}, "plugin", "install", "fx-badconfig", "--image", signed.String(), "--config", bad, "--signers", im.signers)
		expect(t, r, ExitInvalid, "does not match the manifest's configSchema", "/currency")
		if k.plugin(t, "fx-badconfig") != nil {
			t.Error("a Plugin was written with a config its schema refuses")
		}
	})
	t.Run("config missing where the schema requires one", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "install", "fx-noconfig", "--image", signed.String(), "--signers", im.signers)
		expect(t, r, ExitInvalid, "config (none given, so {})", "currency")
		if k.plugin(t, "fx-noconfig") != nil {
			t.Error("a Plugin was written without its required config")
		}
	})
	t.Run("config that is not an object", func(t *testing.T) {
		list := tempFile(t, "list.yaml", "- a\n- b\n")
		r := openfief(t, k, runOpts{}, "plugin", "install", "fx-list", "--image", signed.String(), "--config", list, "--signers", im.signers)
		expect(t, r, ExitInvalid, "config must be an object, not an array")
	})
	t.Run("--all with a host", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "approve", "fx-install", "--all", "--host", "api.nbp.pl", "--yes")
		expect(t, r, ExitUsage, "combine it only with --secret")
	})
	t.Run("invalid name", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "install", "Fx_1", "--image", signed.String(), "--config", config, "--signers", im.signers)
		expect(t, r, ExitInvalid, "NAME: invalid name")
	})
	t.Run("trust from the cluster's signers ConfigMap", func(t *testing.T) {
		// Without --signers and without the ConfigMap, the owner key is not
		// trusted, so its signature does not count.
		r := openfief(t, k, runOpts{}, "plugin", "install", "fx-cm", "--image", signed.String(), "--config", config)
		expect(t, r, ExitUnsigned, "no ConfigMap openfief-trusted-signers")
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: plugins.OwnerSignersConfigMap, Namespace: plugins.Namespace},
			Data:       map[string]string{plugins.OwnerSignersKey: im.signersJSON(t)},
		}
		if err := k.c.Create(context.Background(), cm); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.c.Delete(context.Background(), cm) })
		r = openfief(t, k, runOpts{}, "plugin", "install", "fx-cm", "--image", signed.String(), "--config", config)
		expect(t, r, ExitOK, "plugin/fx-cm created", "SignedByTrustedSigner by owner")
	})
}

// TestUpgrade checks `plugin upgrade` takes the manifest from the new
// image's label, keeps the config, shows what the new version waits for,
// and refuses an unknown plugin, an unsigned image and a no-op.
func TestUpgrade(t *testing.T) {
	k := newKube(t)
	im := newImages(t)
	v1 := im.signed(t, "plugins/fx", fxV1)
	v2 := im.signed(t, "plugins/fx", fxV2)
	config := tempFile(t, "config.yaml", fxConfig)
	expect(t, openfief(t, k, runOpts{}, "plugin", "install", "fx-upgrade", "--image", v1.String(), "--config", config, "--signers", im.signers), ExitOK)
	expect(t, openfief(t, k, runOpts{}, "plugin", "approve", "fx-upgrade", "--yes"), ExitOK)

	r := openfief(t, k, runOpts{}, "plugin", "upgrade", "fx-upgrade", "--image", v2.String(), "--signers", im.signers)
	expect(t, r, ExitOK, "plugin/fx-upgrade upgraded", "Pending approval", "Egress:        static.nbp.pl:8443")
	p := k.plugin(t, "fx-upgrade")
	if p.Spec.Image != v2.String() || !apiconv.ManifestFromAPI(p.Spec.Manifest).Equal(fxV2) {
		t.Errorf("spec after upgrade: %s %+v", p.Spec.Image, p.Spec.Manifest)
	}
	var cfg map[string]string
	if err := json.Unmarshal(p.Spec.Config.Raw, &cfg); err != nil || cfg["currency"] != "PLN" {
		t.Errorf("config not kept: %s", p.Spec.Config.Raw)
	}

	t.Run("same image", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "upgrade", "fx-upgrade", "--image", v2.String(), "--signers", im.signers)
		expect(t, r, ExitNothingToDo, "already has image")
	})
	t.Run("unknown plugin", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "upgrade", "fx-nobody", "--image", v2.String(), "--signers", im.signers)
		expect(t, r, ExitNotFound, `plugin "fx-nobody" not found`)
	})
	t.Run("unsigned image", func(t *testing.T) {
		unsigned := im.unsigned(t, "plugins/fx-unsigned", fxV2)
		r := openfief(t, k, runOpts{}, "plugin", "upgrade", "fx-upgrade", "--image", unsigned.String(), "--signers", im.signers)
		expect(t, r, ExitUnsigned, "Unsigned")
		if got := k.plugin(t, "fx-upgrade").Spec.Image; got != v2.String() {
			t.Errorf("an unsigned image was written: %s", got)
		}
	})
	t.Run("new config that the schema refuses", func(t *testing.T) {
		bad := tempFile(t, "bad.yaml", "currency: 12\n")
		r := openfief(t, k, runOpts{}, "plugin", "upgrade", "fx-upgrade", "--image", v1.String(), "--config", bad, "--signers", im.signers)
		expect(t, r, ExitInvalid, "/currency")
		if got := k.plugin(t, "fx-upgrade").Spec.Image; got != v2.String() {
			t.Errorf("the image changed though the config was refused: %s", got)
		}
	})
}
