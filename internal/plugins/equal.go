package plugins

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strings"
	"unicode/utf8"
)

// Equal reports whether two manifests ask for the same thing, as the operator
// checks a Plugin's spec.manifest against the image's signed label (D-42).
// Capabilities, egress hosts (in canonical form, so "api.example.com" equals
// "API.example.com:443"), Secret mounts (name and mount path together) and
// data tiers compare as sets, so order and repeats do not matter; the owner
// egress slots compare as numbers (OF-36), and so do resources ("1024Mi"
// equals "1Gi", an unreadable quantity equals nothing). Config
// schemas compare as JSON values: object key order and white space do not
// matter, array order does, and numbers compare by exact decimal value, never
// through float64, so 100, 100.0 and 1e2 are equal (as JSON Schema reads
// them) while 0.1 and 0.10000000000000001 are not. A missing or empty schema
// equals only another missing or empty one. Equal fails closed: an egress host
// that does not canonicalise or a schema that is not exactly one valid JSON
// value makes it report false.
func (m Manifest) Equal(o Manifest) bool {
	if m.OwnerEgress != o.OwnerEgress ||
		!sameResources(m.Resources, o.Resources) ||
		!sameSet(m.Capabilities, o.Capabilities) ||
		!sameSet(m.Secrets, o.Secrets) ||
		!sameSet(m.DataTiers, o.DataTiers) {
		return false
	}
	mh, ok := canonicalHostSet(m.Egress)
	if !ok {
		return false
	}
	oh, ok := canonicalHostSet(o.Egress)
	if !ok || !sameKeys(mh, oh) {
		return false
	}
	return sameDocument(m.ConfigSchema, o.ConfigSchema)
}

func sameSet[T comparable](a, b []T) bool {
	return sameKeys(setOf(a), setOf(b))
}

func setOf[T comparable](xs []T) map[T]struct{} {
	s := make(map[T]struct{}, len(xs))
	for _, x := range xs {
		s[x] = struct{}{}
	}
	return s
}

func sameKeys[T comparable](a, b map[T]struct{}) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// canonicalHostSet canonicalises every host; ok is false if one does not.
func canonicalHostSet(hosts []string) (map[string]struct{}, bool) {
	s := make(map[string]struct{}, len(hosts))
	for _, h := range hosts {
		c, err := CanonicalEgressHost(h)
		if err != nil {
			return nil, false
		}
		s[c] = struct{}{}
	}
	return s, true
}

// EqualConfig reports whether two instance configs are the same JSON value,
// compared as Equal compares config schemas: object key order and white
// space do not matter, array order does, and numbers compare by exact
// decimal value. A missing or empty config equals {}, which is what a plugin
// without one receives. It fails closed: a config that is not exactly one
// valid JSON value equals nothing. The operator uses it to tell whether the
// version status.deployed records is the one the spec asks for.
func EqualConfig(a, b json.RawMessage) bool {
	return sameDocument(emptyAsObject(a), emptyAsObject(b))
}

// emptyAsObject is doc, or {} when doc is missing or only white space.
func emptyAsObject(doc json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(doc)) == 0 {
		return json.RawMessage("{}")
	}
	return doc
}

// sameDocument compares two JSON documents as values with exact numbers; a
// missing or empty document equals only another missing or empty one.
func sameDocument(a, b json.RawMessage) bool {
	aEmpty, bEmpty := len(bytes.TrimSpace(a)) == 0, len(bytes.TrimSpace(b)) == 0
	if aEmpty || bEmpty {
		return aEmpty && bEmpty
	}
	if !utf8.Valid(a) || !utf8.Valid(b) {
		return false
	}
	av, err := decodeOneJSON(a)
	if err != nil {
		return false
	}
	bv, err := decodeOneJSON(b)
	if err != nil {
		return false
	}
	return sameJSON(av, bv)
}

// sameJSON compares values decoded with UseNumber.
func sameJSON(a, b any) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case bool:
		bb, ok := b.(bool)
		return ok && a == bb
	case string:
		bs, ok := b.(string)
		return ok && a == bs
	case json.Number:
		bn, ok := b.(json.Number)
		return ok && sameNumber(a, bn)
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], bs[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, av := range a {
			bv, ok := bm[k]
			if !ok || !sameJSON(av, bv) {
				return false
			}
		}
		return true
	}
	return false
}

// sameNumber compares two JSON numbers by exact decimal value.
func sameNumber(a, b json.Number) bool {
	if a == b {
		return true
	}
	ca, ok := canonicalDecimal(string(a))
	if !ok {
		return false
	}
	cb, ok := canonicalDecimal(string(b))
	return ok && ca == cb
}

// canonicalDecimal rewrites a JSON number as sign, significant digits and a
// decimal exponent ("-12e-3" for -0.012), with zero always "0". It never
// builds the number itself, so an exponent such as 1e999999999 costs no more
// than its text. ok is false if s is not a JSON number.
func canonicalDecimal(s string) (string, bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp, hasExp := strings.Cut(s, "e")
	if !hasExp {
		mant, exp, hasExp = strings.Cut(s, "E")
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	if !decimalDigits(intPart) || (frac != "" && !decimalDigits(frac)) || strings.HasSuffix(mant, ".") {
		return "", false
	}
	e := new(big.Int)
	if hasExp {
		if _, ok := e.SetString(strings.TrimPrefix(exp, "+"), 10); !ok || strings.HasPrefix(exp, "+-") || strings.HasPrefix(exp, "-+") {
			return "", false
		}
	}
	digits := intPart + frac
	e.Sub(e, big.NewInt(int64(len(frac))))
	trimmed := strings.TrimLeft(digits, "0")
	if trimmed == "" {
		return "0", true
	}
	noTrail := strings.TrimRight(trimmed, "0")
	e.Add(e, big.NewInt(int64(len(trimmed)-len(noTrail))))
	sign := ""
	if neg {
		sign = "-"
	}
	return sign + noTrail + "e" + e.String(), true
}

// decimalDigits reports whether s is one or more ASCII digits.
func decimalDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
