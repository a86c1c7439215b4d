package sandbox

import (
	"strings"
	"unicode"
)

// printable returns s with every byte that is not printable ASCII replaced
// by '?', cut to at most limit bytes: what a hostile image or plugin wrote
// may reach a terminal only this way.
func printable(s string, limit int) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < limit; i++ {
		c := s[i]
		if c < 0x80 && unicode.IsPrint(rune(c)) {
			b.WriteByte(c)
		} else {
			b.WriteByte('?')
		}
	}
	return b.String()
}
