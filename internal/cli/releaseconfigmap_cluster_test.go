//go:build cluster

package cli

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestReleaseConfigMapIsNotTrusted: whoever may write ConfigMaps in
// openfief edits openfief-release's catalog to point nbp-fx at their own
// image, published by their own key. The operator,
// with its compiled-in catalog, would not call that image Verified, so the
// CLI must not either: `catalog list`, `plugin install --catalog` and
// `plugin install --image` never say Verified for it, and nothing is
// installed.
func TestReleaseConfigMapIsNotTrusted(t *testing.T) {
	k := newKube(t)
	im := newImages(t)
	attacker := cosigntest.NewKey(t)
	evil := im.reg.PushImage(t, "openfief/nbp-fx-evil", cosigntest.ManifestLabel(t, fxV2))
	im.reg.Sign(t, evil, attacker)

	forged := catalogJSON(t, evil, plugins.Signer{Name: "openfief", Kind: plugins.SignerPublisher, Identity: plugins.SignerIdentity{PublicKeyPEM: attacker.PublicKeyPEM(t)}})
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "openfief-release", Namespace: plugins.Namespace, Labels: map[string]string{"app.kubernetes.io/version": "v9.8.7"}},
		// "catalog" is the key the release overlay wrote before; the
		// attacker writes it whatever the overlay does now.
		Data: map[string]string{"catalog": string(forged)},
	}
	ctx := context.Background()
	if err := k.c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.c.Delete(context.Background(), cm) })

	for _, args := range [][]string{
		{"catalog", "list"},
		{"catalog", "list", "--signers", im.signers},
		{"plugin", "install", "fx-forged-release", "--catalog", "nbp-fx", "--config", tempFile(t, "c.yaml", fxConfig)},
		{"plugin", "install", "fx-forged-release", "--catalog", "nbp-fx", "--config", tempFile(t, "c.yaml", fxConfig), "--signers", im.signers},
		{"plugin", "install", "fx-forged-release", "--image", evil.String(), "--config", tempFile(t, "c.yaml", fxConfig)},
	} {
		r := openfief(t, k, runOpts{}, args...)
		t.Logf("openfief %s: %s", strings.Join(args, " "), r)
		if strings.Contains(r.out+r.errOut, "Verified") && !strings.Contains(r.out+r.errOut, "not Verified") {
			t.Errorf("openfief %s says Verified for the image an edited ConfigMap names:\n%s", strings.Join(args, " "), r)
		}
		if !slices.Contains(args, "--image") && (strings.Contains(r.out, evil.String()) || strings.Contains(r.out, shortImage(evil.String()))) {
			t.Errorf("openfief %s shows the ConfigMap's image as the catalog's:\n%s", strings.Join(args, " "), r)
		}
		if args[1] == "install" && r.code == ExitOK {
			t.Errorf("openfief %s installed the ConfigMap's image:\n%s", strings.Join(args, " "), r)
		}
	}
	if p := k.plugin(t, "fx-forged-release"); p != nil {
		t.Errorf("a Plugin was written for the image an edited ConfigMap names: %s", p.Spec.Image)
	}
}
