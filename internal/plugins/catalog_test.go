package plugins

import (
	"crypto/elliptic"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// trDigest is a digest made of one repeated hex digit.
func trDigest(hex byte) string { return "sha256:" + strings.Repeat(string(hex), 64) }

// trImage parses repository@trDigest(hex).
func trImage(t testing.TB, repository string, hex byte) ImageRef {
	t.Helper()
	r, err := ParseImageRef(repository + "@" + trDigest(hex))
	if err != nil {
		t.Fatalf("ParseImageRef: %v", err)
	}
	return r
}

// trCatalogEntry writes one catalog entry with a keyless publisher.
func trCatalogEntry(name, image, publisher, subject string) string {
	return fmt.Sprintf(`{"name": %q, "image": %q, "publisher": {"name": %q, "issuer": %q, "subject": %q}}`,
		name, image, publisher, trIssuer, subject)
}

func TestParseCatalog(t *testing.T) {
	keyPEM := trPEM(t, trECKey(t, elliptic.P256()).Public())
	keyJSON := strings.ReplaceAll(keyPEM, "\n", `\n`)
	imgA := "ghcr.io/acme/bank@" + trDigest('a')
	imgB := "ghcr.io/acme/fx@" + trDigest('b')
	entryA := trCatalogEntry("bank", imgA, "Acme", trSubject)
	entryB := trCatalogEntry("fx", imgB, "Acme", trSubject)

	t.Run("valid", func(t *testing.T) {
		in := `{"plugins": [` + entryA + `, ` + entryB + `,
			{"name": "local", "image": "example.com/x@` + trDigest('c') + `", "publisher": {"name": "Keyed", "publicKey": "` + keyJSON + `"}}]}`
		c, err := ParseCatalog([]byte(in))
		if err != nil {
			t.Fatalf("ParseCatalog: %v", err)
		}
		acme := Signer{Name: "Acme", Kind: SignerPublisher, Identity: SignerIdentity{Issuer: trIssuer, Subject: trSubject}}
		keyed := Signer{Name: "Keyed", Kind: SignerPublisher, Identity: SignerIdentity{PublicKeyPEM: keyPEM}}
		want := []CatalogEntry{
			{Name: "bank", Image: trImage(t, "ghcr.io/acme/bank", 'a'), Publisher: acme},
			{Name: "fx", Image: trImage(t, "ghcr.io/acme/fx", 'b'), Publisher: acme},
			{Name: "local", Image: trImage(t, "example.com/x", 'c'), Publisher: keyed},
		}
		if got := c.Entries(); !reflect.DeepEqual(got, want) {
			t.Errorf("Entries\n got %+v\nwant %+v", got, want)
		}
		if got, want := c.Publishers(), []Signer{acme, keyed}; !reflect.DeepEqual(got, want) {
			t.Errorf("Publishers\n got %+v\nwant %+v", got, want)
		}
		if c.Len() != 3 {
			t.Errorf("Len = %d, want 3", c.Len())
		}
		c.Entries()[0].Name = "changed"
		if c.Entries()[0].Name != "bank" {
			t.Errorf("Entries shares its slice with the catalog")
		}
	})

	tests := map[string]struct {
		in        string
		wantErr   error // besides ErrInvalidCatalog
		wantField string
	}{
		"empty input":                        {in: ``, wantField: catalogDocument},
		"JSON null":                          {in: `null`, wantField: "plugins"},
		"plugins missing":                    {in: `{}`, wantField: "plugins"},
		"plugins null":                       {in: `{"plugins": null}`, wantField: "plugins"},
		"unknown top-level field":            {in: `{"plugins": [], "version": 2}`, wantField: catalogDocument},
		"top-level field in another case":    {in: `{"Plugins": []}`, wantField: catalogDocument},
		"unknown entry field":                {in: `{"plugins": [{"name": "bank", "image": "` + imgA + `", "verified": true}]}`, wantField: "plugins[0]"},
		"unknown publisher field":            {in: `{"plugins": [{"name": "bank", "image": "` + imgA + `", "publisher": {"name": "A", "issuer": "` + trIssuer + `", "subject": "s", "email": "a@b"}}]}`, wantField: "plugins[0].publisher"},
		"repeated entry field":               {in: `{"plugins": [{"name": "bank", "name": "evil", "image": "` + imgA + `"}]}`, wantField: "plugins[0]"},
		"trailing document":                  {in: `{"plugins": []}{"plugins": []}`, wantField: catalogDocument},
		"trailing comma":                     {in: `{"plugins": [],}`, wantField: catalogDocument},
		"invalid UTF-8":                      {in: "{\"plugins\": [], \"\xfe\": 1}", wantField: catalogDocument},
		"image is a number":                  {in: `{"plugins": [{"name": "bank", "image": 1}]}`, wantField: "plugins.image"},
		"entry name invalid":                 {in: `{"plugins": [` + trCatalogEntry("Bank", imgA, "Acme", trSubject) + `]}`, wantErr: ErrInvalidName, wantField: "plugins[0].name"},
		"entry name missing":                 {in: `{"plugins": [` + trCatalogEntry("", imgA, "Acme", trSubject) + `]}`, wantErr: ErrRequired, wantField: "plugins[0].name"},
		"image by tag":                       {in: `{"plugins": [` + trCatalogEntry("bank", "ghcr.io/acme/bank:1.0", "Acme", trSubject) + `]}`, wantErr: ErrInvalidImage, wantField: "plugins[0].image"},
		"image with tag and digest":          {in: `{"plugins": [` + trCatalogEntry("bank", "ghcr.io/acme/bank:1.0@"+trDigest('a'), "Acme", trSubject) + `]}`, wantErr: ErrInvalidImage, wantField: "plugins[0].image"},
		"repeated name":                      {in: `{"plugins": [` + entryA + `, ` + trCatalogEntry("bank", imgB, "Acme", trSubject) + `]}`, wantErr: ErrDuplicate, wantField: "plugins[1].name"},
		"repeated digest from a mirror":      {in: `{"plugins": [` + entryA + `, ` + trCatalogEntry("mirror", "mirror.example/bank@"+trDigest('a'), "Acme", trSubject) + `]}`, wantErr: ErrDuplicate, wantField: "plugins[1].image"},
		"publisher missing":                  {in: `{"plugins": [{"name": "bank", "image": "` + imgA + `"}]}`, wantErr: ErrRequired, wantField: "plugins[0].publisher"},
		"publisher with a pattern":           {in: `{"plugins": [{"name": "bank", "image": "` + imgA + `", "publisher": {"name": "A", "issuer": "` + trIssuer + `", "subjectPattern": ".*"}}]}`, wantErr: ErrInvalidSigner, wantField: "plugins[0].publisher.subjectPattern"},
		"publisher with subject and pattern": {in: `{"plugins": [{"name": "bank", "image": "` + imgA + `", "publisher": {"name": "A", "issuer": "` + trIssuer + `", "subject": "s", "subjectPattern": "s"}}]}`, wantErr: ErrInvalidSigner, wantField: "plugins[0].publisher.subjectPattern"},
		"publisher without a subject":        {in: `{"plugins": [{"name": "bank", "image": "` + imgA + `", "publisher": {"name": "A", "issuer": "` + trIssuer + `"}}]}`, wantErr: ErrInvalidSigner, wantField: "plugins[0].publisher.subject"},
		"publisher with an http issuer":      {in: `{"plugins": [{"name": "bank", "image": "` + imgA + `", "publisher": {"name": "A", "issuer": "http://x.example", "subject": "s"}}]}`, wantErr: ErrInvalidSigner, wantField: "plugins[0].publisher.issuer"},
		"publisher without a name":           {in: `{"plugins": [{"name": "bank", "image": "` + imgA + `", "publisher": {"issuer": "` + trIssuer + `", "subject": "s"}}]}`, wantErr: ErrInvalidSigner, wantField: "plugins[0].publisher.name"},
		"publisher with a bad key":           {in: `{"plugins": [{"name": "bank", "image": "` + imgA + `", "publisher": {"name": "A", "publicKey": "junk"}}]}`, wantErr: ErrInvalidSigner, wantField: "plugins[0].publisher.publicKey"},
		"one publisher, two identities":      {in: `{"plugins": [` + entryA + `, ` + trCatalogEntry("fx", imgB, "Acme", trSubject+"x") + `]}`, wantErr: ErrInvalidSigner, wantField: "plugins[1].publisher"},
		"one bad entry among good ones":      {in: `{"plugins": [` + entryA + `, ` + trCatalogEntry("fx", "fx", "Acme", trSubject) + `]}`, wantErr: ErrInvalidImage, wantField: "plugins[1].image"},
		"too large":                          {in: `{"plugins": []}` + strings.Repeat("\n", maxTrustFileLen), wantField: catalogDocument},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := ParseCatalog([]byte(tc.in))
			trCheckErr(t, err, ErrInvalidCatalog, tc.wantField)
			if tc.wantErr != nil {
				trCheckErr(t, err, tc.wantErr, tc.wantField)
			}
			if c.Len() != 0 {
				t.Errorf("a refused catalog still holds %d entries", c.Len())
			}
		})
	}
}

// TestCatalogLookup checks that only the digest counts, so a mirror of a
// pinned image is found too (D-44).
func TestCatalogLookup(t *testing.T) {
	c, err := ParseCatalog([]byte(`{"plugins": [` + trCatalogEntry("bank", "ghcr.io/acme/bank@"+trDigest('a'), "Acme", trSubject) + `]}`))
	if err != nil {
		t.Fatalf("ParseCatalog: %v", err)
	}
	tests := map[string]struct {
		img  ImageRef
		want bool
	}{
		"the pinned image":                 {trImage(t, "ghcr.io/acme/bank", 'a'), true},
		"a mirror of it":                   {trImage(t, "mirror.example:5000/copies/bank", 'a'), true},
		"the repository at another digest": {trImage(t, "ghcr.io/acme/bank", 'b'), false},
		"the zero image":                   {ImageRef{}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e, ok := c.Lookup(tc.img)
			if ok != tc.want {
				t.Fatalf("Lookup found = %v, want %v", ok, tc.want)
			}
			if ok && e.Name != "bank" {
				t.Errorf("Lookup = %q, want bank", e.Name)
			}
		})
	}
	var zero Catalog
	if _, ok := zero.Lookup(trImage(t, "ghcr.io/acme/bank", 'a')); ok || zero.Len() != 0 || zero.Publishers() != nil {
		t.Errorf("the zero Catalog is not empty")
	}
}
