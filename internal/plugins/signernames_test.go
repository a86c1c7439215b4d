package plugins

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestSignerNamesAcrossKinds: a signer's name names one signer whatever its
// kind; an owner signer may take neither another trusted signer's name
// (OpenFief's CI, a catalog publisher, another owner signer, letter case
// aside) nor a name reserved for OpenFief's own signers. Each case reads the
// owner's signers.json and the catalog as the operator, the CLI and the
// dashboard do: ParseOwnerSigners, then NewTrustPolicy with the catalog.
func TestSignerNamesAcrossKinds(t *testing.T) {
	owner := func(names ...string) string {
		var sigs []string
		for i, n := range names {
			sigs = append(sigs, fmt.Sprintf(`{"name": %q, "issuer": %q, "subject": "owner-%d"}`, n, trIssuer, i))
		}
		return `{"signers": [` + strings.Join(sigs, ", ") + `]}`
	}
	catalog := func(publishers ...string) string {
		var entries []string
		for i, p := range publishers {
			entries = append(entries, trCatalogEntry(fmt.Sprintf("p%d", i), fmt.Sprintf("ghcr.io/x/p%d@%s", i, trDigest(byte('a'+i))), p, "publisher-"+p))
		}
		return `{"plugins": [` + strings.Join(entries, ", ") + `]}`
	}
	tests := map[string]struct {
		catalog, owner string
		// wantField is the field refused ("" when all is accepted), and
		// wantDetail words its detail must hold.
		wantField, wantDetail string
		// inCatalog: ParseCatalog refuses it, not the owner's file.
		inCatalog bool
	}{
		"distinct names":                         {catalog: catalog("Acme", "openfief"), owner: owner("me", "laptop", "openfiefer", "my-openfief-ci")},
		"owner named as the CI":                  {owner: owner("me", "laptop", "openfief-ci"), wantField: "signers[2].name", wantDetail: `"openfief-ci" is reserved for OpenFief's CI signer`},
		"owner named as the CI, in capitals":     {owner: owner("OpenFief-CI"), wantField: "signers[0].name", wantDetail: "reserved for OpenFief's CI signer"},
		"owner named openfief":                   {owner: owner("openfief"), wantField: "signers[0].name", wantDetail: `"openfief" and names starting "openfief-"`},
		"owner with the reserved prefix":         {owner: owner("me", "OPENFIEF-release"), wantField: "signers[1].name", wantDetail: "is reserved"},
		"owner with the prefix, Kelvin K":        {owner: owner("openfief-\u212Aey"), wantField: "signers[0].name", wantDetail: "is reserved"},
		"two owners, one name":                   {owner: owner("me", "me"), wantField: "signers[1].name", wantDetail: "another owner signer (signers[0])"},
		"two owners, one name in two cases":      {owner: owner("Me", "mE"), wantField: "signers[1].name", wantDetail: "another owner signer (signers[0])"},
		"owner named as a publisher":             {catalog: catalog("Acme"), owner: owner("me", "Acme"), wantField: "signers[1].name", wantDetail: "a catalog publisher (catalog.publishers[0])"},
		"owner named as a publisher, case":       {catalog: catalog("Acme"), owner: owner("acme"), wantField: "signers[0].name", wantDetail: "a catalog publisher"},
		"owner named as the release's publisher": {catalog: catalog("openfief"), owner: owner("openfief"), wantField: "signers[0].name", wantDetail: "is reserved"},
		"publisher named as the CI":              {catalog: catalog("openfief-ci"), inCatalog: true, wantField: "plugins[0].publisher.name", wantDetail: "reserved for OpenFief's CI signer"},
		"publisher spelt two ways":               {catalog: catalog("Acme", "acme"), inCatalog: true, wantField: "plugins[1].publisher.name", wantDetail: `"acme" is written "Acme" at plugins[0]`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := Catalog{}
			if tc.catalog != "" {
				var err error
				c, err = ParseCatalog([]byte(tc.catalog))
				if tc.inCatalog {
					trCheckErr(t, err, ErrInvalidSigner, tc.wantField)
					if !errors.Is(err, ErrInvalidCatalog) || !strings.Contains(err.Error(), tc.wantDetail) {
						t.Errorf("ParseCatalog: %v; want %v and %q", err, ErrInvalidCatalog, tc.wantDetail)
					}
					return
				}
				if err != nil {
					t.Fatalf("ParseCatalog: %v", err)
				}
			}
			signers, err := ParseOwnerSigners([]byte(tc.owner))
			if err == nil {
				_, err = NewTrustPolicy(c, signers)
			}
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			trCheckErr(t, err, ErrInvalidSigner, tc.wantField)
			if err != nil && !strings.Contains(err.Error(), tc.wantField+": "+ErrInvalidSigner.Error()+": ") {
				t.Errorf("error %q does not start its problem with the field", err)
			}
			if err != nil && !strings.Contains(err.Error(), tc.wantDetail) {
				t.Errorf("error %q does not say %q", err, tc.wantDetail)
			}
		})
	}
}

// TestOwnerSignerNamedAsCI: an owner signer handed to NewTrustPolicy or
// validated on its own (as the dashboard's and the CLI's policies are built)
// is refused under OpenFief's CI's name, so no policy can hold two signers
// called openfief-ci and show an owner's signature as the CI's.
func TestOwnerSignerNamedAsCI(t *testing.T) {
	id := SignerIdentity{Issuer: trIssuer, Subject: "https://github.com/me/x"}
	fake := Signer{Name: OpenFiefCI().Name, Kind: SignerOwner, Identity: id}
	p, err := NewTrustPolicy(Catalog{}, []Signer{{Name: "me", Kind: SignerOwner, Identity: id}, fake})
	trCheckErr(t, err, ErrInvalidSigner, "signers[1].name")
	if got := len(p.Signers()); got != 0 {
		t.Errorf("a refused policy trusts %d signers", got)
	}
	if err != nil && !strings.Contains(err.Error(), `signers[1].name: invalid signer: "openfief-ci" is reserved for OpenFief's CI signer`) {
		t.Errorf("error = %q", err)
	}
	trCheckErr(t, fake.Validate(), ErrInvalidSigner, "signer.name")
	// The CI itself keeps its name.
	if err := OpenFiefCI().Validate(); err != nil {
		t.Errorf("OpenFiefCI().Validate() = %v", err)
	}
}

func TestSignerNameKey(t *testing.T) {
	same := [][2]string{{"Acme", "aCME"}, {"openfief-ci", "OPENFIEF-CI"}, {"k", "\u212A"}, {"straße", "STRAßE"}}
	for _, p := range same {
		if signerNameKey(p[0]) != signerNameKey(p[1]) {
			t.Errorf("signerNameKey(%q) != signerNameKey(%q)", p[0], p[1])
		}
	}
	differ := [][2]string{{"acme", "acme2"}, {"openfief-ci", "openfief_ci"}, {"straße", "strasse"}}
	for _, p := range differ {
		if signerNameKey(p[0]) == signerNameKey(p[1]) {
			t.Errorf("signerNameKey(%q) == signerNameKey(%q)", p[0], p[1])
		}
	}
}

// TestCIPublishesAKeylessCatalog: a keyless release's catalog names
// OpenFief's CI as its publisher (hack/release's releaseSigner), with the
// CI's own name and identity: one signer, so the catalog parses, the policy
// builds and an owner still may not take the name. The same name with
// another identity is refused.
func TestCIPublishesAKeylessCatalog(t *testing.T) {
	ci := OpenFiefCI()
	entry := func(subject string) string {
		return fmt.Sprintf(`{"plugins": [{"name": "nbp-fx", "image": "ghcr.io/x/nbp-fx@%s", "publisher": {"name": %q, "issuer": %q, "subject": %q}}]}`,
			trDigest('a'), ci.Name, ci.Identity.Issuer, subject)
	}
	c, err := ParseCatalog([]byte(entry(ci.Identity.Subject)))
	if err != nil {
		t.Fatalf("a keyless release's catalog: %v", err)
	}
	if _, err := NewTrustPolicy(c, nil); err != nil {
		t.Fatalf("the policy with the CI as publisher: %v", err)
	}
	owner, err := ParseOwnerSigners([]byte(fmt.Sprintf(`{"signers": [{"name": "OpenFief-CI", "issuer": %q, "subject": "me"}]}`, trIssuer)))
	if err == nil {
		_, err = NewTrustPolicy(c, owner)
	}
	if !errors.Is(err, ErrInvalidSigner) {
		t.Errorf("an owner signer named as the CI beside a CI-published catalog: %v", err)
	}
	if _, err := ParseCatalog([]byte(entry("repo:someone/else:ref:refs/heads/main"))); !errors.Is(err, ErrInvalidSigner) {
		t.Errorf("a publisher named as the CI with another identity: %v", err)
	}
}
