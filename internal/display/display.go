// Package display renders text that came from outside (a vendor's
// manifest, a plugin's answer, a registry's diagnostic, a condition message)
// so that it can be shown on a terminal or a page without acting on it
// (OF-17). Validation already refuses such characters in manifests and
// grants; this is the second line, for everything that was never validated
// or that reaches a person by another road.
//
// Text escapes every rune plugins.IsUnsafeRune names (C0 and C1 controls,
// DEL, bidirectional controls, line and paragraph separators) and every
// byte that is not valid UTF-8 as a visible escape, and bounds the length
// with a visible ellipsis. Everything else is kept as it was.
//
// It also holds the few phrases the CLI and the dashboard both show
// (phrases.go), so the two say the same thing in the same words.
package display

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// DefaultMax is how many runes Text keeps of a string: enough for any
// manifest field, host, condition message or error a person needs to read,
// short enough that one value cannot push the rest of a prompt off the
// screen.
const DefaultMax = 1024

// MessageMax is how many runes Message keeps: diagnostics (a registry's
// refusal, a condition message, a plugin's error) wrap causes and run long.
const MessageMax = 4096

// Ellipsis marks text that was cut.
const Ellipsis = "…"

// Text returns s ready to show: unsafe runes and invalid bytes escaped, at
// most DefaultMax runes.
func Text(s string) string { return Limit(s, DefaultMax) }

// Message returns a diagnostic ready to show, as Text does, at most
// MessageMax runes.
func Message(s string) string { return Limit(s, MessageMax) }

// Limit returns s with every unsafe rune shown as \xHH (below U+0100) or
// \uHHHH, every byte of invalid UTF-8 as \xHH, and the result cut to at
// most limit runes, the last of them Ellipsis when anything was cut. An
// escape is never split. limit below 1 is taken as 1.
func Limit(s string, limit int) string {
	if limit < 1 {
		limit = 1
	}
	if isPlain(s) && utf8.RuneCountInString(s) <= limit {
		return s
	}
	var b strings.Builder
	n := 0 // runes written
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var piece string
		switch {
		case r == utf8.RuneError && size == 1:
			piece = fmt.Sprintf(`\x%02x`, s[i])
		case plugins.IsUnsafeRune(r) && r < 0x100:
			piece = fmt.Sprintf(`\x%02x`, r)
		case plugins.IsUnsafeRune(r):
			piece = fmt.Sprintf(`\u%04x`, r)
		default:
			piece = s[i : i+size]
		}
		i += size
		width := utf8.RuneCountInString(piece)
		// Keep room for the ellipsis unless this piece ends the string.
		room := limit - n
		if i < len(s) {
			room--
		}
		if width > room {
			b.WriteString(Ellipsis)
			return b.String()
		}
		b.WriteString(piece)
		n += width
	}
	return b.String()
}

// Lines renders multi-line text: each line (split at '\n') through Limit
// with perLine, at most maxLines lines, and a last line saying how many
// were left out. A line separator inside outside text would otherwise be a
// way to forge a line of its own, so use Lines only for text whose line
// breaks are the program's (indented JSON, joined errors).
func Lines(s string, perLine, maxLines int) string {
	lines := strings.Split(s, "\n")
	if maxLines < 1 {
		maxLines = 1
	}
	var b strings.Builder
	for i, l := range lines {
		if i == maxLines {
			fmt.Fprintf(&b, "\n%s (%d more lines)", Ellipsis, len(lines)-i)
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(Limit(l, perLine))
	}
	return b.String()
}

// Join renders each item with Text and joins them with sep.
func Join(items []string, sep string) string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = Text(s)
	}
	return strings.Join(out, sep)
}

// None is what Set shows for a set with nothing in it.
const None = "none"

// Set puts an unordered set of values (the capabilities, hosts or Secrets
// of a manifest, a grant or a status) in the order a person reads it in:
// sorted, so the same set always reads the same, and None alone when it is
// empty. It does not escape, so values already through Text are not cut
// again: give it escaped values, or escape what it returns (the CLI does
// the first, the dashboard the second). The CLI joins it on one line; the
// dashboard gives each value a line of its own.
func Set(items []string) []string {
	if len(items) == 0 {
		return []string{None}
	}
	out := slices.Clone(items)
	slices.Sort(out)
	return out
}

// isPlain reports whether s is valid UTF-8 without an unsafe rune.
func isPlain(s string) bool {
	for _, r := range s {
		if plugins.IsUnsafeRune(r) {
			return false
		}
	}
	return utf8.ValidString(s)
}
