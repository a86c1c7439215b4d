//go:build heavy

package stockcosign

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestStockCosignAttestationIsNotASignature shows what docs/images.md and
// RELEASE.md warn about with the stock tools: an image that carries only an
// SBOM attestation made by `cosign attest` with the vendor's key passes
// `cosign verify --key` (cosign counts the attestation's bundle as a
// signature; its output's critical.type names the SBOM's type), yet fails the
// documented check, `cosign verify-attestation --type
// https://sigstore.dev/cosign/sign/v1`, and `openfief plugin verify` refuses
// it as unsigned, saying it carries an attestation and no signature. Once
// the image is signed with `cosign sign`, both pass.
func TestStockCosignAttestationIsNotASignature(t *testing.T) {
	crane, cosignBin := tool(t, "crane"), tool(t, "cosign")
	label, err := json.Marshal(manifest)
	if err != nil {
		t.Fatal(err)
	}
	reg := cosigntest.NewRegistry(t, true)
	off := newOffline(t)
	dir := t.TempDir()
	off.run(t, dir, cosignBin, "generate-key-pair")
	pub, err := os.ReadFile(filepath.Join(dir, "cosign.pub"))
	if err != nil {
		t.Fatal(err)
	}

	base := reg.Host + "/acme/attested:base"
	off.run(t, dir, crane, "append", "--oci-empty-base", "-f", layerTar(t, dir, "acme/attested"), "-t", base)
	off.run(t, dir, crane, "mutate", base, "--label", plugins.ManifestLabel+"="+string(label), "-t", reg.Host+"/acme/attested:v1")
	digest := strings.TrimSpace(off.run(t, dir, crane, "digest", reg.Host+"/acme/attested:v1"))
	ref, err := plugins.ParseImageRef(reg.Host + "/acme/attested@" + digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sbom.json"), []byte(`{"bomFormat":"CycloneDX","specVersion":"1.6"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	offline := []string{"--tlog-upload=false", "--use-signing-config=false", "--yes"}
	off.run(t, dir, cosignBin, append([]string{"attest", "--key", "cosign.key", "--type", "cyclonedx", "--predicate", "sbom.json"}, append(offline, ref.String())...)...)

	verify := []string{"verify", "--key", "cosign.pub", "--insecure-ignore-tlog=true", ref.String()}
	checkSignature := []string{"verify-attestation", "--key", "cosign.pub", "--insecure-ignore-tlog=true", "--type", plugins.SignPredicateType, ref.String()}

	// cosign verify passes on the attestation alone; its output says what
	// it verified.
	out := off.run(t, dir, cosignBin, verify...)
	if types := criticalTypes(t, out); len(types) != 1 || types[0] != plugins.SBOMPredicateType {
		t.Errorf("cosign verify of an attested, unsigned image verified %v, want the SBOM's type only", types)
	}
	// The documented check does not.
	if _, err := off.try(t, dir, cosignBin, checkSignature...); err == nil {
		t.Error("cosign verify-attestation --type " + plugins.SignPredicateType + " passed an image carrying only an SBOM attestation")
	}
	signersFile := filepath.Join(dir, "signers.json")
	signers, err := json.Marshal(map[string]any{"signers": []any{map[string]string{"name": "acme-vendor", "publicKey": string(pub)}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(signersFile, signers, 0o600); err != nil {
		t.Fatal(err)
	}
	code, cliOut := openfief(t, "plugin", "verify", ref.String(), "--signers", signersFile)
	if code != cli.ExitUnsigned || !strings.Contains(cliOut, "it carries 1 attestation (such as an SBOM or provenance) and no signature") {
		t.Errorf("openfief plugin verify of an attested, unsigned image: exit %d, want %d saying it carries an attestation and no signature\n%s", code, cli.ExitUnsigned, cliOut)
	}

	// Signed with cosign sign, it passes both.
	off.run(t, dir, cosignBin, append([]string{"sign", "--key", "cosign.key"}, append(offline, ref.String())...)...)
	off.run(t, dir, cosignBin, checkSignature...)
	if types := criticalTypes(t, off.run(t, dir, cosignBin, verify...)); !contains(types, plugins.SignPredicateType) {
		t.Errorf("cosign verify of the signed image verified %v, want %s among them", types, plugins.SignPredicateType)
	}
	if code, cliOut := openfief(t, "plugin", "verify", ref.String(), "--signers", signersFile); code != cli.ExitOK || !strings.Contains(cliOut, "Result:     SignedByTrustedSigner") {
		t.Errorf("openfief plugin verify of the signed image: exit %d\n%s", code, cliOut)
	}
	if n := off.calls.Load(); n != 0 {
		t.Errorf("the tools reached for the network %d times", n)
	}
}

// criticalTypes reads the critical.type of each claim cosign verify prints
// as JSON.
func criticalTypes(t *testing.T, out string) []string {
	t.Helper()
	var claims []struct {
		Critical struct {
			Type string `json:"type"`
		} `json:"critical"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &claims); err != nil {
		t.Fatalf("cosign verify printed %q: %v", out, err)
	}
	var types []string
	for _, c := range claims {
		types = append(types, c.Critical.Type)
	}
	return types
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
