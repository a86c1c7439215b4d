package release

import (
	"regexp"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestNotesVerify: RELEASE.md's Verify section checks the image's signature
// by its statement type (cosign verify alone passes an image carrying only
// an attestation), and its openfief plugin verify line names the release's
// catalog file, for a key release and a keyless one. TestMake runs the
// section's commands against a made release.
func TestNotesVerify(t *testing.T) {
	res := &Result{Version: "v1.2.0", Images: map[string]plugins.ImageRef{}, Attestations: map[string]images.Attested{}, CLI: map[string][]byte{"openfief-linux-amd64": nil}}
	for i, n := range []string{"nbp-fx", "ibkr-flex", "check-probe", "operator", "egress-proxy", "openfief-core"} {
		ref, err := plugins.ParseImageRef("r.example/openfief/" + n + "@sha256:" + strings.Repeat(string(rune('1'+i)), 64))
		if err != nil {
			t.Fatal(err)
		}
		res.Images[n] = ref
	}
	key := plugins.Signer{Name: "acme", Kind: plugins.SignerPublisher, Identity: plugins.SignerIdentity{PublicKeyPEM: "-----BEGIN PUBLIC KEY-----\n...\n-----END PUBLIC KEY-----\n"}}
	for name, tc := range map[string]struct {
		publisher plugins.Signer
		who       string
	}{
		"key":     {key, "--key " + PublisherKeyFile + " --insecure-ignore-tlog=true"},
		"keyless": {plugins.OpenFiefCI(), "--certificate-identity " + plugins.OpenFiefCISubject + " --certificate-oidc-issuer " + plugins.GitHubActionsIssuer},
	} {
		t.Run(name, func(t *testing.T) {
			md := notes(Options{Publisher: tc.publisher}, images.Source{Commit: "abc"}, res)
			blocks, expected := verifyBlocks(t, md)
			cmds := strings.Join(blocks, "\n")
			for _, want := range []string{
				"cosign verify-attestation " + tc.who + " --type " + plugins.SignPredicateType + " " + res.Images["operator"].String(),
				"openfief plugin verify " + res.Images["nbp-fx"].String() + " --catalog-file " + CatalogFile,
				"sha256sum -c " + ChecksumsFile,
			} {
				if !strings.Contains(cmds, want) {
					t.Errorf("the Verify section does not run %q:\n%s", want, cmds)
				}
			}
			if regexp.MustCompile(`(?m)^cosign verify `).MatchString(cmds) {
				t.Errorf("the Verify section runs a bare cosign verify, which passes an image carrying only an attestation:\n%s", cmds)
			}
			if want := []string{"Result:     Verified", "Signer:     " + tc.publisher.Name}; strings.Join(expected, "\n") != strings.Join(want, "\n") {
				t.Errorf("expected output %q, want %q", expected, want)
			}
		})
	}
}

// verifyBlocks returns the shell blocks of RELEASE.md's Verify section, in
// order, and the lines of its text blocks (what the commands print).
func verifyBlocks(t *testing.T, md string) (sh []string, text []string) {
	t.Helper()
	_, section, ok := strings.Cut(md, "\n## Verify\n")
	if !ok {
		t.Fatal("RELEASE.md has no Verify section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var kind string
	var cur []string
	for line := range strings.Lines(section) {
		line = strings.TrimRight(line, "\n")
		switch {
		case kind == "" && strings.HasPrefix(line, "```"):
			kind, cur = strings.TrimPrefix(line, "```"), nil
		case kind != "" && line == "```":
			if kind == "sh" {
				sh = append(sh, strings.Join(cur, "\n"))
			} else {
				text = append(text, cur...)
			}
			kind = ""
		case kind != "":
			cur = append(cur, line)
		}
	}
	if len(sh) == 0 {
		t.Fatal("RELEASE.md's Verify section has no sh block")
	}
	return sh, text
}
