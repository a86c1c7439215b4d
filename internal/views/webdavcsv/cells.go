package webdavcsv

import (
	"strings"

	"github.com/arkadiuss/openfief/sdk/go/delivery"
)

// formulaStarts are the first characters a spreadsheet may read as the
// start of a formula (=, +, -, @) or that hide one behind white space
// (tab, carriage return, line feed).
const formulaStarts = "=+-@\t\r\n"

// Neutralise returns a cell ready for a spreadsheet user: a value that
// starts with one of = + - @ TAB CR LF gets a single quote in front, so a
// spreadsheet shows it as text instead of evaluating it, unless the whole
// value is a decimal in the contract's form (an optional '-', digits, and
// optionally '.' and digits, as delivery.IsDecimal reads it), such as the
// amount -12.50. Such a value is a number to every spreadsheet and can call
// nothing, so amounts stay exact and summable. Every other value is kept
// as it is.
func Neutralise(cell string) string {
	if cell == "" || !strings.ContainsRune(formulaStarts, rune(cell[0])) || delivery.IsDecimal(cell) {
		return cell
	}
	return "'" + cell
}
