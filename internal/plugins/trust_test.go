package plugins

import (
	"crypto/elliptic"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// trustFixture is a policy with one of every kind of signer: OpenFief's CI,
// two catalog publishers (keyless Acme pinning "bank" at digest a, and a
// keyed publisher pinning "local" at digest c), and two owner signers (a
// subject pattern and a key).
type trustFixture struct {
	policy                      TrustPolicy
	catalog                     Catalog
	acme, keyed, mine, laptop   Signer
	ciSig, acmeSig, keyedSig    SignatureIdentity
	mineSig, laptopSig, evilSig SignatureIdentity
}

func newTrustFixture(t testing.TB) trustFixture {
	t.Helper()
	keyedPEM := trPEM(t, trECKey(t, elliptic.P256()).Public())
	laptopPEM := trPEM(t, trECKey(t, elliptic.P384()).Public())
	const acmeSubject = "https://github.com/acme/bank/.github/workflows/release.yml@refs/tags/v1"
	cat := fmt.Sprintf(`{"plugins": [
		{"name": "bank", "image": "ghcr.io/acme/bank@%s", "publisher": {"name": "Acme", "issuer": %q, "subject": %q}},
		{"name": "local", "image": "example.com/local@%s", "publisher": {"name": "Keyed", "publicKey": %q}}
	]}`, trDigest('a'), trIssuer, acmeSubject, trDigest('c'), keyedPEM)
	c, err := ParseCatalog([]byte(cat))
	if err != nil {
		t.Fatalf("ParseCatalog: %v", err)
	}
	f := trustFixture{
		catalog: c,
		acme:    Signer{Name: "Acme", Kind: SignerPublisher, Identity: SignerIdentity{Issuer: trIssuer, Subject: acmeSubject}},
		keyed:   Signer{Name: "Keyed", Kind: SignerPublisher, Identity: SignerIdentity{PublicKeyPEM: keyedPEM}},
		mine:    Signer{Name: "mine", Kind: SignerOwner, Identity: SignerIdentity{Issuer: trIssuer, SubjectPattern: `https://github\.com/me/[^/]+/\.github/workflows/build\.yml@refs/heads/main`}},
		laptop:  Signer{Name: "laptop", Kind: SignerOwner, Identity: SignerIdentity{PublicKeyPEM: laptopPEM}},

		ciSig:     SignatureIdentity{Issuer: GitHubActionsIssuer, Subject: OpenFiefCISubject},
		acmeSig:   SignatureIdentity{Issuer: trIssuer, Subject: acmeSubject},
		keyedSig:  SignatureIdentity{PublicKeyPEM: keyedPEM},
		mineSig:   SignatureIdentity{Issuer: trIssuer, Subject: "https://github.com/me/fx/.github/workflows/build.yml@refs/heads/main"},
		laptopSig: SignatureIdentity{PublicKeyPEM: laptopPEM},
		evilSig:   SignatureIdentity{Issuer: trIssuer, Subject: "https://github.com/evil/bank/.github/workflows/release.yml@refs/tags/v1"},
	}
	f.policy, err = NewTrustPolicy(c, []Signer{f.mine, f.laptop})
	if err != nil {
		t.Fatalf("NewTrustPolicy: %v", err)
	}
	return f
}

func trManifest() Manifest {
	return Manifest{
		Capabilities: []Capability{CapabilityConnector},
		Egress:       []string{"api.bank.example"},
		Secrets:      []SecretMount{{Name: "bank", MountPath: "/etc/bank"}},
		ConfigSchema: []byte(`{"type":"object"}`),
	}
}

func TestNewTrustPolicy(t *testing.T) {
	f := newTrustFixture(t)
	want := []Signer{OpenFiefCI(), f.acme, f.keyed, f.mine, f.laptop}
	if got := f.policy.Signers(); !reflect.DeepEqual(got, want) {
		t.Errorf("Signers\n got %+v\nwant %+v", got, want)
	}
	if got, want := f.policy.PublicKeys(), slices.Sorted(maps.Keys(map[string]bool{f.keyed.Identity.PublicKeyPEM: true, f.laptop.Identity.PublicKeyPEM: true})); !reflect.DeepEqual(got, want) {
		t.Errorf("PublicKeys = %q, want %q", got, want)
	}
	if f.policy.Catalog().Len() != 2 {
		t.Errorf("Catalog().Len() = %d, want 2", f.policy.Catalog().Len())
	}

	p, err := NewTrustPolicy(Catalog{}, nil)
	if err != nil {
		t.Fatalf("NewTrustPolicy(empty): %v", err)
	}
	if got := p.Signers(); !reflect.DeepEqual(got, []Signer{OpenFiefCI()}) {
		t.Errorf("an empty policy trusts %+v, want only OpenFief's CI", got)
	}
	if got := p.PublicKeys(); len(got) != 0 {
		t.Errorf("an empty policy has public keys %q", got)
	}

	tests := map[string]struct {
		owner     []Signer
		wantField string
	}{
		"owner signer of another kind": {owner: []Signer{{Name: "x", Kind: SignerPublisher, Identity: f.mine.Identity}}, wantField: "signers[0].kind"},
		"owner signer claiming CI":     {owner: []Signer{{Name: "x", Kind: SignerOpenFiefCI, Identity: f.mine.Identity}}, wantField: "signers[0].kind"},
		"owner signer malformed":       {owner: []Signer{f.mine, {Name: "x", Kind: SignerOwner, Identity: SignerIdentity{Issuer: trIssuer, SubjectPattern: "("}}}, wantField: "signers[1].subjectPattern"},
		"owner signer without a name":  {owner: []Signer{{Kind: SignerOwner, Identity: f.mine.Identity}}, wantField: "signers[0].name"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := NewTrustPolicy(f.catalog, tc.owner)
			trCheckErr(t, err, ErrInvalidSigner, tc.wantField)
			if len(p.Signers()) != 0 {
				t.Errorf("a refused policy still trusts %d signers", len(p.Signers()))
			}
		})
	}
}

func TestDecide(t *testing.T) {
	f := newTrustFixture(t)
	bank := trImage(t, "ghcr.io/acme/bank", 'a')
	bankMirror := trImage(t, "mirror.example/acme/bank", 'a')
	local := trImage(t, "example.com/local", 'c')
	other := trImage(t, "ghcr.io/acme/other", 'e')
	m := trManifest()
	differs := trManifest()
	differs.Egress = append(differs.Egress, "evil.example")
	reordered := trManifest()
	reordered.Egress = []string{"API.bank.example:443"}
	invalid := Manifest{Capabilities: []Capability{"admin"}}
	bankEntry, _ := f.catalog.Lookup(bank)
	localEntry, _ := f.catalog.Lookup(local)

	sigs := func(s ...SignatureIdentity) []SignatureIdentity { return s }
	tests := map[string]struct {
		img        SignedImage
		declared   *Manifest
		wantErr    error
		wantLevel  TrustLevel
		wantSigner Signer
		wantEntry  *CatalogEntry
	}{
		"no signatures":                        {img: SignedImage{Image: other, Manifest: &m}, declared: &m, wantErr: ErrUnsigned},
		"empty signature list":                 {img: SignedImage{Image: bank, Signatures: sigs(), Manifest: &m}, wantErr: ErrUnsigned},
		"only an untrusted signer":             {img: SignedImage{Image: bank, Signatures: sigs(f.evilSig), Manifest: &m}, declared: &m, wantErr: ErrUntrustedSigner},
		"only a malformed signature":           {img: SignedImage{Image: bank, Signatures: sigs(SignatureIdentity{Issuer: trIssuer}), Manifest: &m}, wantErr: ErrUntrustedSigner},
		"a key no one trusts":                  {img: SignedImage{Image: local, Signatures: sigs(SignatureIdentity{PublicKeyPEM: trPEM(t, trECKey(t, elliptic.P256()).Public())})}, wantErr: ErrUntrustedSigner},
		"CI, not in the catalog":               {img: SignedImage{Image: other, Signatures: sigs(f.ciSig), Manifest: &m}, declared: &m, wantLevel: Unverified, wantSigner: OpenFiefCI()},
		"CI, digest pinned for Acme":           {img: SignedImage{Image: bank, Signatures: sigs(f.ciSig)}, wantLevel: Unverified, wantSigner: OpenFiefCI()},
		"Acme, its pinned digest":              {img: SignedImage{Image: bank, Signatures: sigs(f.acmeSig), Manifest: &m}, declared: &m, wantLevel: Verified, wantSigner: f.acme, wantEntry: &bankEntry},
		"Acme, a mirror of its pinned digest":  {img: SignedImage{Image: bankMirror, Signatures: sigs(f.acmeSig)}, wantLevel: Verified, wantSigner: f.acme, wantEntry: &bankEntry},
		"Acme, a digest it does not pin":       {img: SignedImage{Image: other, Signatures: sigs(f.acmeSig)}, wantLevel: Unverified, wantSigner: f.acme},
		"Acme, Keyed's pinned digest":          {img: SignedImage{Image: local, Signatures: sigs(f.acmeSig)}, wantLevel: Unverified, wantSigner: f.acme},
		"Keyed, its pinned digest":             {img: SignedImage{Image: local, Signatures: sigs(f.keyedSig)}, wantLevel: Verified, wantSigner: f.keyed, wantEntry: &localEntry},
		"CI and Acme: the publisher wins":      {img: SignedImage{Image: bank, Signatures: sigs(f.ciSig, f.evilSig, f.acmeSig)}, wantLevel: Verified, wantSigner: f.acme, wantEntry: &bankEntry},
		"owner pattern":                        {img: SignedImage{Image: other, Signatures: sigs(f.mineSig)}, wantLevel: Unverified, wantSigner: f.mine},
		"owner key":                            {img: SignedImage{Image: other, Signatures: sigs(f.laptopSig)}, wantLevel: Unverified, wantSigner: f.laptop},
		"owner and CI: policy order, not sigs": {img: SignedImage{Image: other, Signatures: sigs(f.laptopSig, f.mineSig, f.ciSig)}, wantLevel: Unverified, wantSigner: OpenFiefCI()},
		"untrusted then trusted":               {img: SignedImage{Image: other, Signatures: sigs(f.evilSig, f.mineSig)}, wantLevel: Unverified, wantSigner: f.mine},
		"declared equals the label as a set":   {img: SignedImage{Image: other, Signatures: sigs(f.ciSig), Manifest: &m}, declared: &reordered, wantLevel: Unverified, wantSigner: OpenFiefCI()},
		"declared differs from the label":      {img: SignedImage{Image: bank, Signatures: sigs(f.acmeSig), Manifest: &m}, declared: &differs, wantErr: ErrManifestMismatch},
		"declared, image has no label":         {img: SignedImage{Image: bank, Signatures: sigs(f.acmeSig)}, declared: &m, wantErr: ErrManifestMismatch},
		"declared is empty, no label":          {img: SignedImage{Image: bank, Signatures: sigs(f.acmeSig)}, declared: &Manifest{}, wantErr: ErrManifestMismatch},
		"invalid label":                        {img: SignedImage{Image: bank, Signatures: sigs(f.acmeSig), Manifest: &invalid}, declared: &invalid, wantErr: ErrInvalidLabel},
		"untrusted signer, matching manifest":  {img: SignedImage{Image: other, Signatures: sigs(f.evilSig), Manifest: &m}, declared: &m, wantErr: ErrUntrustedSigner},
		"no digest":                            {img: SignedImage{Signatures: sigs(f.ciSig), Manifest: &m}, declared: &m, wantErr: ErrInvalidImage},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d, err := f.policy.Decide(tc.img, tc.declared)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Decide error = %v, want %v", err, tc.wantErr)
				}
				if !reflect.DeepEqual(d, Decision{}) {
					t.Errorf("a refusal still carries a decision: %+v", d)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decide: %v", err)
			}
			if d.Level != tc.wantLevel || d.Signer != tc.wantSigner {
				t.Errorf("Decide = %s by %+v, want %s by %+v", d.Level, d.Signer, tc.wantLevel, tc.wantSigner)
			}
			if !reflect.DeepEqual(d.CatalogEntry, tc.wantEntry) {
				t.Errorf("CatalogEntry = %+v, want %+v", d.CatalogEntry, tc.wantEntry)
			}
			switch {
			case tc.img.Manifest == nil && d.Manifest != nil:
				t.Errorf("Manifest = %+v, want nil: the image has no label", d.Manifest)
			case tc.img.Manifest != nil && (d.Manifest == nil || !reflect.DeepEqual(*d.Manifest, *tc.img.Manifest)):
				t.Errorf("Manifest = %+v, want the signed label %+v", d.Manifest, tc.img.Manifest)
			}
		})
	}
}

// TestDecideCopiesTheManifest checks a Decision shares no slice with the
// signed image it judged.
func TestDecideCopiesTheManifest(t *testing.T) {
	f := newTrustFixture(t)
	m := trManifest()
	d, err := f.policy.Decide(SignedImage{Image: trImage(t, "x.example/p", 'e'), Signatures: []SignatureIdentity{f.ciSig}, Manifest: &m}, nil)
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	m.Egress[0] = "evil.example"
	m.ConfigSchema[0] = '['
	if d.Manifest.Egress[0] != "api.bank.example" || d.Manifest.ConfigSchema[0] != '{' {
		t.Errorf("the Decision's manifest changed with the image's: %+v", d.Manifest)
	}
}

// TestDecideKeepsOwnerEgressSlots: a label with slots for hosts of the
// owner's choosing matches itself declared, and the Decision keeps the
// slots; the same label declared with another number of slots does not
// match.
func TestDecideKeepsOwnerEgressSlots(t *testing.T) {
	f := newTrustFixture(t)
	m := trManifest()
	m.OwnerEgress = 1
	img := SignedImage{Image: trImage(t, "x.example/p", 'e'), Signatures: []SignatureIdentity{f.ciSig}, Manifest: &m}
	declared := cloneManifest(m)
	d, err := f.policy.Decide(img, &declared)
	if err != nil {
		t.Fatalf("Decide with the label itself declared: %v", err)
	}
	if d.Manifest.OwnerEgress != 1 {
		t.Errorf("the Decision's manifest has %d owner slots, want 1", d.Manifest.OwnerEgress)
	}
	declared.OwnerEgress = 2
	if _, err := f.policy.Decide(img, &declared); !errors.Is(err, ErrManifestMismatch) {
		t.Errorf("Decide with 2 slots declared against a label of 1: %v, want ErrManifestMismatch", err)
	}
}

// TestNothingAdmitsAnUnsignedImage checks D-57 over every combination of
// catalog, owner signers, image, label and declared manifest: an image with
// no verified signature is always refused, and the zero policy admits
// nothing, not even OpenFief's CI.
func TestNothingAdmitsAnUnsignedImage(t *testing.T) {
	f := newTrustFixture(t)
	everyone := Signer{Name: "anyone", Kind: SignerOwner, Identity: SignerIdentity{Issuer: trIssuer, SubjectPattern: ".*"}}
	catalogs := map[string]Catalog{"none": {}, "two entries": f.catalog}
	owners := map[string][]Signer{"none": nil, "two": {f.mine, f.laptop}, "anyone from the issuer": {everyone}}
	images := []ImageRef{trImage(t, "ghcr.io/acme/bank", 'a'), trImage(t, "example.com/local", 'c'), trImage(t, "x.example/y", 'e')}
	m := trManifest()
	labels := []*Manifest{nil, &m, {}}
	for cn, c := range catalogs {
		for on, o := range owners {
			p, err := NewTrustPolicy(c, o)
			if err != nil {
				t.Fatalf("NewTrustPolicy(%s, %s): %v", cn, on, err)
			}
			for _, img := range images {
				for _, label := range labels {
					for _, declared := range labels {
						for _, signatures := range [][]SignatureIdentity{nil, {}} {
							d, err := p.Decide(SignedImage{Image: img, Signatures: signatures, Manifest: label}, declared)
							if !errors.Is(err, ErrUnsigned) || !reflect.DeepEqual(d, Decision{}) {
								t.Errorf("catalog %s, owner %s, %s: Decide = %+v, %v; want ErrUnsigned", cn, on, img, d, err)
							}
						}
					}
				}
			}
		}
	}

	var zero TrustPolicy
	for _, sig := range []SignatureIdentity{f.ciSig, f.acmeSig, f.laptopSig, {}} {
		if d, err := zero.Decide(SignedImage{Image: images[0], Signatures: []SignatureIdentity{sig}, Manifest: &m}, &m); !errors.Is(err, ErrUntrustedSigner) {
			t.Errorf("the zero policy decided %+v, %v for %+v; want ErrUntrustedSigner", d, err, sig)
		}
	}
}

// TestDecideRefusalNamesTheSigners checks an untrusted refusal says who
// signed, without the key itself.
func TestDecideRefusalNamesTheSigners(t *testing.T) {
	f := newTrustFixture(t)
	other := SignatureIdentity{PublicKeyPEM: trPEM(t, trECKey(t, elliptic.P256()).Public())}
	_, err := f.policy.Decide(SignedImage{Image: trImage(t, "x.example/y", 'e'), Signatures: []SignatureIdentity{f.evilSig, other, f.evilSig, f.evilSig, f.evilSig}}, nil)
	if !errors.Is(err, ErrUntrustedSigner) {
		t.Fatalf("Decide error = %v, want ErrUntrustedSigner", err)
	}
	msg := err.Error()
	for _, want := range []string{f.evilSig.Subject, "a public key", "and 2 more"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not mention %q", msg, want)
		}
	}
	if strings.Contains(msg, "BEGIN") {
		t.Errorf("message %q holds a PEM key", msg)
	}
}

// BenchmarkDecide measures one decision against a policy of a 50-entry
// catalog and 10 owner signers (half subject patterns, half keys), for an
// image with an untrusted and a key signature and a declared manifest: the
// worst ordinary path, since every signer is tried before a key matches.
func BenchmarkDecide(b *testing.B) {
	var entries []string
	for i := 0; i < 50; i++ {
		entries = append(entries, fmt.Sprintf(`{"name": "p%d", "image": "ghcr.io/v%d/p@sha256:%064x", "publisher": {"name": "V%d", "issuer": %q, "subject": "https://github.com/v%d/p/.github/workflows/r.yml@refs/heads/main"}}`, i, i, i, i, trIssuer, i))
	}
	c, err := ParseCatalog([]byte(`{"plugins": [` + strings.Join(entries, ",") + `]}`))
	if err != nil {
		b.Fatalf("ParseCatalog: %v", err)
	}
	var owner []Signer
	var lastKey string
	for i := 0; i < 10; i++ {
		id := SignerIdentity{Issuer: trIssuer, SubjectPattern: fmt.Sprintf(`https://github\.com/owner%d/[^/]+/\.github/workflows/.+@refs/heads/main`, i)}
		if i%2 == 1 {
			lastKey = trPEM(b, trECKey(b, elliptic.P256()).Public())
			id = SignerIdentity{PublicKeyPEM: lastKey}
		}
		owner = append(owner, Signer{Name: fmt.Sprintf("o%d", i), Kind: SignerOwner, Identity: id})
	}
	p, err := NewTrustPolicy(c, owner)
	if err != nil {
		b.Fatalf("NewTrustPolicy: %v", err)
	}
	m := trManifest()
	declared := trManifest()
	slices.Reverse(declared.Egress)

	cases := map[string]SignedImage{
		"unverified by an owner key": {
			Image:      trImage(b, "x.example/y", 'e'),
			Signatures: []SignatureIdentity{{Issuer: trIssuer, Subject: "https://github.com/evil/x/.github/workflows/r.yml@refs/heads/main"}, {PublicKeyPEM: lastKey}},
			Manifest:   &m,
		},
		"verified by a catalog publisher": {
			Image:      c.Entries()[49].Image,
			Signatures: []SignatureIdentity{{Issuer: trIssuer, Subject: "https://github.com/v49/p/.github/workflows/r.yml@refs/heads/main"}},
			Manifest:   &m,
		},
	}
	for _, name := range []string{"unverified by an owner key", "verified by a catalog publisher"} {
		img := cases[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Decide(img, &declared); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
