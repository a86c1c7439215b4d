package webdavcsv

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/arkadiuss/openfief/sdk/go/delivery"
)

// separators are the characters a spreadsheet may split a line of the file
// on: the comma the view writes, the semicolon that spreadsheet programs
// use as the list separator in comma-decimal locales (Polish, German), a
// tab, and carriage return and line feed, which an importer that does not
// honour quotes takes as the end of a row. Every piece of a cell after one
// of them may be read as a cell of its own.
const separators = ",;\t\r\n"

// formulaStarts are the characters a spreadsheet may read as the start of
// a formula: = + - @, and their full-width forms, which some spreadsheets
// accept as typed ones.
const formulaStarts = "=+-@\uff1d\uff0b\uff0d\uff20"

// Neutralise returns a cell ready for a spreadsheet user, however the
// spreadsheet splits the line. The cell itself, and every piece of it after
// a separator (comma, semicolon, tab, CR, LF), is a fragment. A fragment
// whose first character, past white space, control and format characters
// and double quotes (which a spreadsheet may trim or unquote), is one of
// = + - @ (or a full-width form) gets a single quote at its very start, so
// the spreadsheet shows it as text instead of evaluating it:
// "Coffee;=cmd|' /C calc'!A0" becomes "Coffee;'=cmd|' /C calc'!A0",
// "x\t=1" becomes "x\t'=1", "a; =1" becomes "a;' =1" and "=1+2" becomes
// "'=1+2". The one exception is a whole value that is a decimal in the
// contract's form (an optional '-', digits, and optionally '.' and digits,
// as delivery.IsDecimal reads it), such as the amount -12.50: it holds no
// separator, is a number to every spreadsheet and can call nothing, so
// amounts stay exact and summable. Nothing else is changed, and the result
// depends on the value alone.
func Neutralise(cell string) string {
	if delivery.IsDecimal(cell) {
		return cell
	}
	var b strings.Builder
	changed, done := false, 0 // cell[:done] is in b
	for start := 0; start <= len(cell); {
		if formulaFragment(cell[start:]) {
			changed = true
			b.WriteString(cell[done:start])
			b.WriteByte('\'')
			done = start
		}
		next := strings.IndexAny(cell[start:], separators)
		if next < 0 {
			break
		}
		start += next + 1
	}
	if !changed {
		return cell
	}
	b.WriteString(cell[done:])
	return b.String()
}

// formulaFragment reports whether the fragment at the start of s (up to
// the first separator) begins, after characters that hide it, with one
// of formulaStarts.
func formulaFragment(s string) bool {
	for s != "" {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r < utf8.RuneSelf && strings.IndexByte(separators, byte(r)) >= 0:
			return false
		case hides(r):
			s = s[size:]
		default:
			return strings.ContainsRune(formulaStarts, r)
		}
	}
	return false
}

// hides reports whether r may stand before a formula's first character
// without stopping a spreadsheet from reading the formula: white space
// (trimmed on import by option), control and format characters (such as a
// zero-width space or a byte order mark), and the double quote (taken off
// by an importer that unquotes a field it split out of a quoted one).
func hides(r rune) bool {
	return r == '"' || unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}
