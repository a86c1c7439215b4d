package plugins

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"unicode/utf8"
)

// MaxMountPathLen bounds a Secret slot's mount path, as the CRD does.
const MaxMountPathLen = 1024

// MaxSchemaText bounds each string of a manifest's config schema (a title, a
// description, a pattern, a property name), in bytes.
const MaxSchemaText = 4096

// IsUnsafeRune reports whether r is a character that text from outside
// (a vendor's manifest, a plugin's answer, a registry's diagnostic) may not
// carry to a person: a C0 control (tab and newline included), DEL, a C1
// control, a Unicode bidirectional control (U+061C, U+200E, U+200F,
// U+202A to U+202E, U+2066 to U+2069) or a line or paragraph separator
// (U+2028, U+2029). Each of them can move a terminal's cursor, erase what
// was printed, or reorder or break what a terminal or a browser shows, so a
// line the owner reads is no longer the line that was written (OF-17).
// This is the one definition of the class: validation refuses it and
// internal/display escapes it.
func IsUnsafeRune(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r >= 0x2028 && r <= 0x202e:
		return true
	case r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// CheckText returns nil when s is valid UTF-8 holding no unsafe rune (see
// IsUnsafeRune) and at most maxLen bytes (no bound when maxLen <= 0). The
// error names the first offending character by code point and byte offset,
// never by echoing the text.
func CheckText(s string, maxLen int) error {
	if maxLen > 0 && len(s) > maxLen {
		return fmt.Errorf("%d bytes, at most %d", len(s), maxLen)
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return fmt.Errorf("not valid UTF-8 at byte %d (0x%02x)", i, s[i])
		}
		if IsUnsafeRune(r) {
			return fmt.Errorf("holds %U, %s, at byte %d", r, unsafeKind(r), i)
		}
		i += size
	}
	return nil
}

// unsafeKind names the family of an unsafe rune for an error message.
func unsafeKind(r rune) string {
	switch {
	case r < 0x20:
		return "a control character"
	case r == 0x7f:
		return "DEL"
	case r <= 0x9f:
		return "a C1 control character"
	case r == 0x2028 || r == 0x2029:
		return "a line or paragraph separator"
	}
	return "a bidirectional control"
}

// checkText adds an ErrUnsafeText problem for field when s breaks the text
// rule, and reports whether s kept it; callers skip their own checks of a
// value that did not, so one value yields one problem.
func (fe *fieldErrors) checkText(field, s string, maxLen int) bool {
	if err := CheckText(s, maxLen); err != nil {
		fe.add(field, ErrUnsafeText, err.Error())
		return false
	}
	return true
}

// checkSchemaText applies the text rule to every string of a config schema,
// object keys included, naming each by its JSON path below field. A schema
// that does not decode is left to checkJSONSchemaShape.
func checkSchemaText(field string, raw []byte) fieldErrors {
	var errs fieldErrors
	if !utf8.Valid(raw) {
		// The decoder would quietly replace the bytes; refuse them.
		errs.add(field, ErrUnsafeText, "not valid UTF-8")
		return errs
	}
	v, err := decodeOneJSON(raw)
	if err != nil {
		return nil
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case string:
			errs.checkText(path, x, MaxSchemaText)
		case []any:
			for i, e := range x {
				walk(path+"["+strconv.Itoa(i)+"]", e)
			}
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				p := path + "[" + strconv.Quote(k) + "]"
				if errs.checkText(path+" (a key)", k, MaxSchemaText) {
					walk(p, x[k])
				} else {
					walk(path+"[?]", x[k])
				}
			}
		case json.Number, bool, nil:
		}
	}
	walk(field, v)
	return errs
}
