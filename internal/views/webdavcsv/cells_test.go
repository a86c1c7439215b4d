package webdavcsv

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"strings"
	"testing"
	"unicode"

	"github.com/arkadiuss/openfief/sdk/go/delivery"
)

// TestNeutralise: anything a spreadsheet could run as a formula gets a
// leading quote, at the start of the cell and after every separator a
// spreadsheet may split on; plain decimals, negative ones included, stay
// numbers.
func TestNeutralise(t *testing.T) {
	for in, want := range map[string]string{
		"":                 "",
		"-12.50":           "-12.50",
		"-0.3":             "-0.3",
		"-1":               "-1",
		"12":               "12",
		"4.2840":           "4.2840",
		"Café =1+1":        "Café =1+1",
		"a=b":              "a=b",
		"=1+2":             "'=1+2",
		`=HYPERLINK("x")`:  `'=HYPERLINK("x")`,
		"+48 600 100 200":  "'+48 600 100 200",
		"+1":               "'+1", // the contract never writes '+'
		"-2+3+cmd|' /C'!A": "'-2+3+cmd|' /C'!A",
		"-1+1":             "'-1+1",
		"-1e5":             "'-1e5",
		"-.5":              "'-.5",
		"-5.":              "'-5.",
		"--1":              "'--1",
		"-":                "'-",
		"- 1":              "'- 1",
		"-fee":             "'-fee",
		"@SUM(A1:A9)":      "'@SUM(A1:A9)",
		"'=1":              "'=1",
		// A tab, CR or LF is itself a separator: the quote goes after it,
		// where the fragment a spreadsheet splits off starts.
		"\t=1": "\t'=1",
		"\r=1": "\r'=1",
		"\n=1": "\n'=1",
		// After a separator (a spreadsheet may split on ; or tab, OF-37).
		"Coffee;=cmd|' /C calc'!A0": "Coffee;'=cmd|' /C calc'!A0",
		"x\t=1+1":                   "x\t'=1+1",
		"a,@SUM(1)":                 "a,'@SUM(1)",
		"a;+1;-2,=3\t@4":            "a;'+1;'-2,'=3\t'@4",
		"a\r\n=1":                   "a\r\n'=1",
		"=1;=2":                     "'=1;'=2",
		"a;;=1":                     "a;;'=1",
		"a;":                        "a;",
		"a;b=1;c":                   "a;b=1;c",
		"a;-1.50":                   "a;'-1.50", // a number in a text cell: a quote costs nothing
		"a;'=1":                     "a;'=1",
		// Hidden behind what a spreadsheet may trim or unquote: the quote
		// goes first, so the trimmed fragment starts with it too.
		"a; =1":      "a;' =1",
		`a;"=1`:      `a;'"=1`,
		`a;"" =1`:    `a;'"" =1`,
		"a;\u00a0=1": "a;'\u00a0=1",
		"a;\u200b=1": "a;'\u200b=1",
		"a;\ufeff=1": "a;'\ufeff=1",
		"a;\x00=1":   "a;'\x00=1",
		"a;\u3000=1": "a;'\u3000=1",
		" \t =1":     " \t' =1",
		"a;\uff1d1":  "a;'\uff1d1",
		"\xff;=1":    "\xff;'=1",
	} {
		if got := Neutralise(in); got != want {
			t.Errorf("Neutralise(%q) = %q, want %q", in, got, want)
		}
	}
}

// hostileCells are values a connector might deliver to make a spreadsheet
// run a formula, however it splits the file.
var hostileCells = []string{
	"Coffee;=cmd|' /C calc'!A0",
	"x\t=1+1",
	"a,@SUM(1)",
	"a; =1+1",
	`a;"=1+1"`,
	"a\n=1+1",
	"a\r=1+1",
	`=HYPERLINK("http://evil.example","fee")`,
	"-fee;+1;-1",
	"\t\r\n =1",
	`"";"=1`,
}

// TestNeutraliseFragments: no fragment of a neutralised cell, however it
// is split and whether or not it is unquoted, starts with a formula.
func TestNeutraliseFragments(t *testing.T) {
	for _, in := range hostileCells {
		if bad := formulaFragments(in, Neutralise(in)); bad != "" {
			t.Errorf("Neutralise(%q) = %q: %s", in, Neutralise(in), bad)
		}
	}
}

// readings are the ways a spreadsheet may split a line: on every separator
// at once, or on one of them (CR and LF together) with the others kept as
// text or white space.
var readings = []string{",;\t\r\n", ",", ";", "\t", "\r\n"}

// formulaFragments returns a description of the first fragment of out,
// the neutralised form of in, that a spreadsheet could read as a formula,
// or "" when there is none. out is split as a cell (a naive reader that
// unquoted the line) and as the view writes it into the file (quoted when
// it must be), where each fragment is read as it is and naively unquoted.
// A plain decimal in is the one value allowed to start with '-'.
func formulaFragments(in, out string) string {
	if delivery.IsDecimal(in) {
		if out != in {
			return "a decimal was changed"
		}
		return ""
	}
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write([]string{out})
	w.Flush()
	raw := strings.TrimSuffix(buf.String(), "\n")
	for _, text := range []string{out, raw} {
		for _, seps := range readings {
			for i, frag := range strings.FieldsFunc(text, func(r rune) bool { return strings.ContainsRune(seps, r) }) {
				for _, f := range []string{frag, naiveUnquote(frag)} {
					if r, ok := firstShown(f); ok && strings.ContainsRune("=+-@\uff1d\uff0b\uff0d\uff20", r) {
						return fmt.Sprintf("split on %q, fragment %d %q starts a formula", seps, i, f)
					}
				}
			}
		}
	}
	return ""
}

// naiveUnquote takes a field's surrounding double quotes off and undoubles
// the ones inside, as an importer that unquotes without checking does.
func naiveUnquote(s string) string {
	s = strings.TrimPrefix(s, `"`)
	s = strings.TrimSuffix(s, `"`)
	return strings.ReplaceAll(s, `""`, `"`)
}

// firstShown returns the first rune of s past what a spreadsheet may trim
// or take off (white space, control and format characters, double quotes).
func firstShown(s string) (rune, bool) {
	for _, r := range s {
		if r != '"' && !unicode.IsSpace(r) && !unicode.IsControl(r) && !unicode.Is(unicode.Cf, r) {
			return r, true
		}
	}
	return 0, false
}
