package plugins

import (
	"errors"
	"fmt"
)

// CatalogEntry is one verified plugin in the catalog (D-43, D-44): its name,
// the image whose digest it pins and the publisher whose signature over that
// digest makes it Verified. A publisher's identity is always exact: an issuer
// with an exact subject, or a public key, never a pattern.
type CatalogEntry struct {
	Name      string
	Image     ImageRef
	Publisher Signer
}

// Catalog is the parsed catalog file, plugins.json, released with the product
// (D-43). Its fields are unexported: a Catalog comes from ParseCatalog, so it
// is always valid, or is the zero Catalog, which lists nothing.
type Catalog struct {
	entries  []CatalogEntry
	byDigest map[string]int
}

// catalogFile is the shape of plugins.json.
type catalogFile struct {
	Plugins *[]catalogEntryJSON `json:"plugins"`
}

type catalogEntryJSON struct {
	Name      string      `json:"name"`
	Image     string      `json:"image"`
	Publisher *signerJSON `json:"publisher"`
}

// catalogDocument names the catalog file in errors about the whole document.
const catalogDocument = "plugins.json"

// ParseCatalog reads the catalog file strictly (D-43, D-44): one JSON object
// {"plugins": [...]}, each entry {"name", "image", "publisher": {"name",
// "issuer", "subject"} or {"name", "publicKey"}}. Unknown or repeated fields,
// trailing data or any invalid entry refuse the whole file. An entry's name
// is a plugin name, its image is pinned by digest, and its publisher has an
// exact identity, never a pattern. No two entries share a name or a digest,
// a publisher name keeps one spelling and one identity across entries, and
// no publisher takes OpenFief's CI's name (signernames.go). Every error is a
// *FieldError wrapping ErrInvalidCatalog (and the rule's own sentinel) with a
// path such as "plugins[2].publisher.subject".
func ParseCatalog(data []byte) (Catalog, error) {
	if len(data) > maxTrustFileLen {
		return Catalog{}, &FieldError{Field: catalogDocument, Err: ErrInvalidCatalog, Detail: fmt.Sprintf("longer than %d bytes", maxTrustFileLen)}
	}
	var f catalogFile
	if path, err := strictDecode(data, &f); err != nil {
		return Catalog{}, &FieldError{Field: orDocument(path, catalogDocument), Err: ErrInvalidCatalog, Detail: err.Error()}
	}
	if f.Plugins == nil {
		return Catalog{}, &FieldError{Field: "plugins", Err: ErrInvalidCatalog, Detail: "required (write [] for none)"}
	}

	var errs fieldErrors
	c := Catalog{byDigest: map[string]int{}}
	names := map[string]int{}
	publishers := map[string]int{}
	for i, ej := range *f.Plugins {
		field := fmt.Sprintf("plugins[%d]", i)
		entry, eerrs := parseCatalogEntry(ej, field)
		errs = append(errs, eerrs...)

		if ej.Name != "" {
			if j, dup := names[ej.Name]; dup {
				errs.add(field+".name", ErrDuplicate, fmt.Sprintf("%q already listed at plugins[%d]", ej.Name, j))
			} else {
				names[ej.Name] = i
			}
		}
		if d := entry.Image.Digest(); d != "" {
			if j, dup := c.byDigest[d]; dup {
				errs.add(field+".image", ErrDuplicate, fmt.Sprintf("digest %s already pinned by plugins[%d]", d, j))
			} else {
				c.byDigest[d] = i
			}
		}
		if ej.Publisher != nil && ej.Publisher.Name != "" {
			key := signerNameKey(ej.Publisher.Name)
			if j, seen := publishers[key]; seen {
				switch other := (*f.Plugins)[j].Publisher; {
				case other.Name != ej.Publisher.Name:
					errs.add(field+".publisher.name", ErrInvalidSigner, fmt.Sprintf("%q is written %q at plugins[%d]: one publisher has one name, and names differing only in case are the same name",
						ej.Publisher.Name, other.Name, j))
				case *other != *ej.Publisher:
					errs.add(field+".publisher", ErrInvalidSigner, fmt.Sprintf("publisher %q has another identity at plugins[%d]", ej.Publisher.Name, j))
				}
			} else {
				publishers[key] = i
			}
		}
		c.entries = append(c.entries, entry)
	}
	if len(errs) > 0 {
		return Catalog{}, underSentinel(ErrInvalidCatalog, errs).err()
	}
	return c, nil
}

func parseCatalogEntry(ej catalogEntryJSON, field string) (CatalogEntry, fieldErrors) {
	var errs fieldErrors
	if err := ValidateName(ej.Name); err != nil {
		errs.add(field+".name", sentinelOf(err), detailOf(err))
	}
	img, err := ParseImageRef(ej.Image)
	if err != nil {
		errs.add(field+".image", ErrInvalidImage, detailOf(err))
	}
	if ej.Publisher == nil {
		errs.add(field+".publisher", ErrRequired, "a catalog entry names the publisher whose signature it pins")
		return CatalogEntry{}, errs
	}
	pub := ej.Publisher.signer(SignerPublisher)
	if pub.Identity.SubjectPattern != "" {
		errs.add(field+".publisher.subjectPattern", ErrInvalidSigner, "a catalog publisher's identity is exact, never a pattern")
		return CatalogEntry{}, errs
	}
	_, serrs := compileSigner(pub, field+".publisher")
	errs = append(errs, serrs...)
	return CatalogEntry{Name: ej.Name, Image: img, Publisher: pub}, errs
}

// underSentinel makes every *FieldError in errs also wrap outer, so a caller
// can test both the document's sentinel and the rule's with errors.Is.
func underSentinel(outer error, errs fieldErrors) fieldErrors {
	out := make(fieldErrors, 0, len(errs))
	for _, e := range errs {
		var fe *FieldError
		if errors.As(e, &fe) && fe.Err != outer {
			e = &FieldError{Field: fe.Field, Err: fmt.Errorf("%w: %w", outer, fe.Err), Detail: fe.Detail}
		}
		out = append(out, e)
	}
	return out
}

// Entries returns a copy of the catalog's entries in file order.
func (c Catalog) Entries() []CatalogEntry {
	return append([]CatalogEntry(nil), c.entries...)
}

// Len is the number of entries.
func (c Catalog) Len() int { return len(c.entries) }

// Lookup returns the entry that pins img's digest. Only the digest counts, so
// the same image pulled from a mirror is found too (D-44).
func (c Catalog) Lookup(img ImageRef) (CatalogEntry, bool) {
	i, ok := c.byDigest[img.Digest()]
	if !ok || img.IsZero() {
		return CatalogEntry{}, false
	}
	return c.entries[i], true
}

// Publishers returns each distinct catalog publisher once, in the order the
// file first names them. D-45 trusts every one of them for any image it signs.
func (c Catalog) Publishers() []Signer {
	var out []Signer
	seen := map[string]bool{}
	for _, e := range c.entries {
		if !seen[e.Publisher.Name] {
			seen[e.Publisher.Name] = true
			out = append(out, e.Publisher)
		}
	}
	return out
}
