package trust

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestLoadPolicySignerNames: the operator's fixed --trusted-signers file and
// the CLI's policy (NewPolicyWithCatalog) refuse an owner key under OpenFief's
// CI's name, or under a catalog publisher's, naming the field; the same key
// under a name of its own is trusted.
func TestLoadPolicySignerNames(t *testing.T) {
	key := cosigntest.NewKey(t)
	write := func(name string) string {
		path := filepath.Join(t.TempDir(), "signers.json")
		if err := os.WriteFile(path, key.SignersJSON(t, name), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	_, err := LoadPolicy(write("openfief-ci"))
	if !errors.Is(err, plugins.ErrInvalidSigner) || !strings.Contains(err.Error(), `signers[0].name: invalid signer: "openfief-ci" is reserved for OpenFief's CI signer`) {
		t.Errorf("LoadPolicy(openfief-ci) = %v", err)
	}
	p, err := LoadPolicy(write("my-key"))
	if err != nil {
		t.Fatalf("LoadPolicy(my-key) = %v", err)
	}
	if got := p.Signers(); len(got) != 2 || got[1].Name != "my-key" || got[1].Kind != plugins.SignerOwner {
		t.Errorf("signers %+v, want OpenFief's CI and my-key", got)
	}

	cat, err := plugins.ParseCatalog([]byte(`{"plugins": [{"name": "fx", "image": "ghcr.io/acme/fx@sha256:` + strings.Repeat("ab", 32) +
		`", "publisher": {"name": "Acme", "issuer": "https://token.actions.githubusercontent.com", "subject": "https://github.com/acme/fx"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewPolicyWithCatalog(cat, key.SignersJSON(t, "acme"))
	if !errors.Is(err, plugins.ErrInvalidSigner) || !strings.Contains(err.Error(), "signers[0].name") || !strings.Contains(err.Error(), "a catalog publisher") {
		t.Errorf("an owner key named as the catalog's publisher: %v", err)
	}
}
