package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestVerify runs `plugin verify` on images in an in-process registry; it
// needs no cluster. Each refusal has its own exit code.
func TestVerify(t *testing.T) {
	im := newImages(t)
	signed := im.signed(t, "plugins/fx", fxV1)
	unsigned := im.unsigned(t, "plugins/unsigned", fxV1)
	noLabel := im.reg.PushImage(t, "plugins/nolabel", nil)
	im.sign(t, noLabel)
	badLabel := im.reg.PushImage(t, "plugins/badlabel", map[string]string{plugins.ManifestLabel: `{"capabilities":["connector"],"egress":["*.nbp.pl"]}`})
	im.sign(t, badLabel)
	stranger := cosigntest.NewKeyless(t, "https://accounts.example.com", "mallory@example.com")
	foreign := im.reg.PushImage(t, "plugins/foreign", cosigntest.ManifestLabel(t, fxV1))
	im.reg.Sign(t, foreign, stranger)
	trustStranger := runOpts{verifier: []cosign.Option{cosign.WithTrustedMaterial(stranger.VS), cosign.WithSCTRequired(false)}}

	t.Run("signed by a trusted signer", func(t *testing.T) {
		r := openfief(t, nil, runOpts{}, "plugin", "verify", signed.String(), "--signers", im.signers)
		expect(t, r, ExitOK,
			"Result:     SignedByTrustedSigner",
			"Signer:     owner (Owner, public key)",
			"not a verified catalog plugin",
			"Egress:        api.nbp.pl:443",
			"Secrets:       fx-token at /etc/fx",
			`"pattern": "^[A-Z]{3}$"`,
			"SBOM:       none signed by owner",
			"Provenance: none signed by owner")
		if r.errOut != "" {
			t.Errorf("stderr on success: %q", r.errOut)
		}
	})
	t.Run("attestations of the signer, and only its", func(t *testing.T) {
		ref := im.signed(t, "plugins/fx-attested", fxV1)
		attest := func(s cosigntest.Signer, predicateType, predicate string) string {
			st, err := ocisign.StatementWith(ref.Digest(), predicateType, []byte(predicate))
			if err != nil {
				t.Fatal(err)
			}
			return im.reg.Attach(t, ref, s.Bundle(t, st), predicateType).String()
		}
		sbom := attest(im.key, plugins.SBOMPredicateType, `{"bomFormat":"CycloneDX"}`)
		prov := attest(im.key, plugins.ProvenancePredicateType, `{"buildDefinition":{}}`)
		// The stranger's SBOM verifies (its root is trusted material here)
		// but the stranger is not the image's signer: not listed.
		foreignSBOM := attest(stranger, plugins.SBOMPredicateType, `{"bomFormat":"CycloneDX"}`)
		r := openfief(t, nil, trustStranger, "plugin", "verify", ref.String(), "--signers", im.signers)
		expect(t, r, ExitOK,
			"SBOM:       "+ref.Name()+"@"+sbom+" (CycloneDX, signed by owner)",
			"Provenance: "+ref.Name()+"@"+prov+" (SLSA v1, signed by owner)")
		if strings.Contains(r.out, foreignSBOM) {
			t.Errorf("the stranger's SBOM is listed:\n%s", r.out)
		}
	})
	t.Run("unsigned", func(t *testing.T) {
		r := openfief(t, nil, runOpts{}, "plugin", "verify", unsigned.String(), "--signers", im.signers)
		expect(t, r, ExitUnsigned, "refused (Unsigned)", "image is not signed")
	})
	t.Run("signed by a key nobody trusts reads as unsigned", func(t *testing.T) {
		r := openfief(t, nil, runOpts{}, "plugin", "verify", signed.String())
		expect(t, r, ExitUnsigned, "refused (Unsigned)", "no owner signers")
	})
	t.Run("untrusted signer", func(t *testing.T) {
		r := openfief(t, nil, trustStranger, "plugin", "verify", foreign.String(), "--signers", im.signers)
		expect(t, r, ExitUntrustedSigner, "refused (UntrustedSigner)", `subject "mallory@example.com"`)
	})
	t.Run("no manifest label", func(t *testing.T) {
		r := openfief(t, nil, runOpts{}, "plugin", "verify", noLabel.String(), "--signers", im.signers)
		expect(t, r, ExitManifestMismatch, "has no io.openfief.plugin.manifest label")
	})
	t.Run("invalid manifest label", func(t *testing.T) {
		r := openfief(t, nil, runOpts{}, "plugin", "verify", badLabel.String(), "--signers", im.signers)
		expect(t, r, ExitManifestMismatch, "label.egress[0]", "wildcards are not allowed")
	})
	t.Run("tag instead of digest", func(t *testing.T) {
		r := openfief(t, nil, runOpts{}, "plugin", "verify", im.reg.Host+"/plugins/fx:1.0", "--signers", im.signers)
		expect(t, r, ExitInvalidImage, "IMAGE: invalid image reference", "not pinned by digest")
	})
	t.Run("no such image", func(t *testing.T) {
		missing := im.reg.Host + "/plugins/fx@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		r := openfief(t, nil, runOpts{}, "plugin", "verify", missing, "--signers", im.signers)
		if r.code != ExitInvalidImage && r.code != ExitUnsigned {
			t.Fatalf("missing image: %s", r)
		}
	})
	t.Run("missing signers file", func(t *testing.T) {
		r := openfief(t, nil, runOpts{}, "plugin", "verify", signed.String(), "--signers", t.TempDir()+"/none.json")
		expect(t, r, ExitUsage, "--signers", "no such file")
	})
	t.Run("invalid signers file", func(t *testing.T) {
		bad := tempFile(t, "signers.json", `{"signers":[{"name":"owner","issuer":"http://insecure.example.com","subject":"x"}]}`)
		r := openfief(t, nil, runOpts{}, "plugin", "verify", signed.String(), "--signers", bad)
		expect(t, r, ExitInvalid, "--signers", "signers[0].issuer")
	})
	t.Run("owner signer named as OpenFief's CI", func(t *testing.T) {
		// The key that signed the image, under the CI's name: refused as a
		// whole, before the image is read, so no signature shows as the CI's.
		named := tempFile(t, "signers.json", string(im.key.SignersJSON(t, "openfief-ci")))
		r := openfief(t, nil, runOpts{}, "plugin", "verify", signed.String(), "--signers", named)
		expect(t, r, ExitInvalid, "--signers", `signers[0].name: invalid signer: "openfief-ci" is reserved for OpenFief's CI signer`)
	})
	t.Run("registry unavailable", func(t *testing.T) {
		down := newImages(t)
		ref := down.signed(t, "plugins/fx", fxV1)
		down.reg.Close()
		r := openfief(t, nil, runOpts{}, "plugin", "verify", ref.String(), "--signers", down.signers)
		expect(t, r, ExitRegistryUnavailable, "RegistryUnavailable")
	})
	t.Run("registry refuses the read", func(t *testing.T) {
		// A private registry: every anonymous read answers 401.
		private := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("WWW-Authenticate", `Basic realm="private"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
		}))
		defer private.Close()
		ref := strings.TrimPrefix(private.URL, "http://") + "/plugins/fx@sha256:" + strings.Repeat("ab", 32)
		r := openfief(t, nil, runOpts{}, "plugin", "verify", ref, "--signers", im.signers)
		expect(t, r, ExitRegistryUnauthorized, "RegistryUnauthorized", "refused the read", "registry answered 401")
		if strings.Contains(r.out+r.errOut, "RegistryUnavailable") {
			t.Errorf("a refused read reported as RegistryUnavailable:\n%s", r)
		}
	})
}
