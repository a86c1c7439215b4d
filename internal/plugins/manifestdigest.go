package plugins

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// ManifestDigest is "sha256:<hex>" of m in a canonical form, so that two
// manifests Equal reports equal have the same digest: sets sorted and
// without repeats, egress hosts in canonical form, quantities as numbers,
// the config schema with its object keys sorted and its numbers as exact
// decimals. A plugin's history records it beside each revision's image. A
// value Equal cannot read (a host that does not canonicalise, a schema that
// is not one JSON value, an unreadable quantity) goes in as written, marked,
// so it still gives a digest of its own.
func ManifestDigest(m Manifest) string {
	var b strings.Builder
	b.WriteString("openfief-manifest-v1\n")
	caps := make([]string, 0, len(m.Capabilities))
	for _, c := range m.Capabilities {
		caps = append(caps, string(c))
	}
	writeDigestSet(&b, "capabilities", caps)
	hosts := make([]string, 0, len(m.Egress))
	for _, h := range m.Egress {
		if c, err := CanonicalEgressHost(h); err == nil {
			hosts = append(hosts, c)
		} else {
			hosts = append(hosts, "!"+h)
		}
	}
	writeDigestSet(&b, "egress", hosts)
	secrets := make([]string, 0, len(m.Secrets))
	for _, s := range m.Secrets {
		secrets = append(secrets, strconv.Quote(s.Name)+" "+strconv.Quote(s.MountPath))
	}
	writeDigestSet(&b, "secrets", secrets)
	writeDigestSet(&b, "dataTiers", m.DataTiers)
	b.WriteString("ownerEgress " + strconv.Itoa(m.OwnerEgress) + "\n")
	for _, d := range resourceDims {
		s := *d.text(&m.Resources)
		switch v, err := d.parse(s); {
		case s == "":
			b.WriteString(d.field + " -\n")
		case err == nil:
			b.WriteString(d.field + " " + strconv.FormatInt(v, 10) + "\n")
		default:
			b.WriteString(d.field + " !" + strconv.Quote(s) + "\n")
		}
	}
	b.WriteString("configSchema ")
	writeCanonicalDocument(&b, m.ConfigSchema)
	sum := sha256.Sum256([]byte(b.String()))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// writeDigestSet writes one line: the field and its values, quoted, sorted
// and without repeats.
func writeDigestSet(b *strings.Builder, field string, values []string) {
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	b.WriteString(field)
	for _, v := range sorted {
		b.WriteString(" " + strconv.Quote(v))
	}
	b.WriteString("\n")
}

// writeCanonicalDocument writes a JSON document as Equal compares it: "-"
// for a missing or empty one, else its value canonically; a document that is
// not one JSON value is written as its quoted bytes, marked.
func writeCanonicalDocument(b *strings.Builder, doc json.RawMessage) {
	if strings.TrimSpace(string(doc)) == "" {
		b.WriteString("-")
		return
	}
	v, err := decodeOneJSON(doc)
	if err != nil {
		b.WriteString("!" + strconv.Quote(string(doc)))
		return
	}
	writeCanonicalJSON(b, v)
}

// writeCanonicalJSON writes a value decoded with UseNumber: object keys
// sorted, strings quoted, numbers as canonicalDecimal (unquoted, so never
// taken for a string).
func writeCanonicalJSON(b *strings.Builder, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case string:
		b.WriteString(strconv.Quote(v))
	case json.Number:
		if c, ok := canonicalDecimal(string(v)); ok {
			b.WriteString(c)
		} else {
			b.WriteString("!" + strconv.Quote(string(v)))
		}
	case []any:
		b.WriteString("[")
		for i, x := range v {
			if i > 0 {
				b.WriteString(",")
			}
			writeCanonicalJSON(b, x)
		}
		b.WriteString("]")
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString("{")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(strconv.Quote(k) + ":")
			writeCanonicalJSON(b, v[k])
		}
		b.WriteString("}")
	}
}
