package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// catalogJSON is a plugins.json naming nbp-fx at image, published by
// publisher (a key's PEM or OpenFief's CI).
func catalogJSON(t *testing.T, image plugins.ImageRef, publisher plugins.Signer) []byte {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"plugins": []any{map[string]any{"name": "nbp-fx", "image": image.String(), "publisher": map[string]string{
		"name": publisher.Name, "publicKey": publisher.Identity.PublicKeyPEM, "issuer": publisher.Identity.Issuer, "subject": publisher.Identity.Subject,
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// catalogBundle signs file as a release signs its plugins.json
// (release.SignCatalog), with s.
func catalogBundle(t *testing.T, s cosigntest.Signer, file []byte) []byte {
	t.Helper()
	sum := sha256.Sum256(file)
	stmt, err := ocisign.StatementWith("sha256:"+hex.EncodeToString(sum[:]), plugins.CatalogPredicateType, []byte(`{"version":"v1.2.0"}`))
	if err != nil {
		t.Fatal(err)
	}
	return s.Bundle(t, stmt)
}

// TestCatalogFileMustBeSigned: `plugin verify --catalog-file` uses a
// release's plugins.json only when the signature beside it verifies for
// exactly its bytes, by OpenFief's CI or a publisher of the CLI's own
// catalog. A swapped plugins.json naming an attacker's key as nbp-fx's publisher, unsigned or signed by that key,
// and a genuine one changed after signing are refused; none makes the
// attacker's re-signed nbp-fx Verified.
func TestCatalogFileMustBeSigned(t *testing.T) {
	im := newImages(t)
	// OpenFief's CI, keyless in a virtual Sigstore the test trusts.
	ci := cosigntest.NewKeyless(t, plugins.GitHubActionsIssuer, plugins.OpenFiefCISubject)
	trustCI := runOpts{verifier: []cosign.Option{cosign.WithTrustedMaterial(ci.VS), cosign.WithSCTRequired(false)}}
	genuine := im.reg.PushImage(t, "openfief/nbp-fx", cosigntest.ManifestLabel(t, fxV1))
	im.reg.Sign(t, genuine, ci)
	// The attacker's copy of nbp-fx, tampered and re-signed by their key.
	attacker := cosigntest.NewKey(t)
	tampered := im.reg.PushImage(t, "openfief/nbp-fx-tampered", cosigntest.ManifestLabel(t, fxV2))
	im.reg.Sign(t, tampered, attacker)
	attackerPub := plugins.Signer{Name: "openfief", Kind: plugins.SignerPublisher, Identity: plugins.SignerIdentity{PublicKeyPEM: attacker.PublicKeyPEM(t)}}

	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("a genuine catalog signed by OpenFief's CI", func(t *testing.T) {
		file := catalogJSON(t, genuine, plugins.OpenFiefCI())
		path := write("genuine.json", file)
		write("genuine.json"+plugins.CatalogSignatureSuffix, catalogBundle(t, ci, file))
		r := openfief(t, nil, trustCI, "plugin", "verify", genuine.String(), "--catalog-file", path)
		expect(t, r, ExitOK, "Result:     Verified", "Signer:     openfief-ci")
	})

	forged := catalogJSON(t, tampered, attackerPub)
	// A fork's release workflow, certified by the same Sigstore as OpenFief's
	// CI: a valid signature by a publisher the CLI does not know.
	fork := &cosigntest.Keyless{VS: ci.VS, Issuer: plugins.GitHubActionsIssuer, Subject: "https://github.com/mallory/openfief/.github/workflows/images.yml@refs/heads/main"}
	for name, c := range map[string]struct {
		file, sig []byte
		want      string
	}{
		"swapped, unsigned":            {file: forged, want: "its signature"},
		"swapped, signed by its key":   {file: forged, sig: catalogBundle(t, attacker, forged), want: "does not verify"},
		"swapped, CI's signature kept": {file: forged, sig: catalogBundle(t, ci, catalogJSON(t, genuine, plugins.OpenFiefCI())), want: "does not verify"},
		"signed by a fork's workflow":  {file: forged, sig: catalogBundle(t, fork, forged), want: "not a publisher this CLI knows"},
		"not a bundle":                 {file: forged, sig: []byte(`{"mediaType":"x"}`), want: "does not verify"},
	} {
		t.Run(name, func(t *testing.T) {
			base := strings.ReplaceAll(name, " ", "-") + ".json"
			path := write(base, c.file)
			if c.sig != nil {
				write(base+plugins.CatalogSignatureSuffix, c.sig)
			}
			r := openfief(t, nil, trustCI, "plugin", "verify", tampered.String(), "--catalog-file", path)
			if r.code == ExitOK || strings.Contains(r.out, "Result:     Verified") {
				t.Fatalf("a swapped plugins.json made the tampered nbp-fx Verified:\n%s", r)
			}
			expect(t, r, ExitUntrustedSigner, "--catalog-file", c.want)
		})
	}
}
