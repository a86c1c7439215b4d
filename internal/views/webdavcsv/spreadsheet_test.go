//go:build cluster

package webdavcsv

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	viewv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1"
)

// hostilePage is a page of two transactions whose text fields would run as
// formulas once a spreadsheet splits the line on a semicolon, a tab or a
// line feed, or trims the spaces in front of a fragment.
func hostilePage() []*viewv1.Entry {
	bank := &connectorv1.Institution{Id: "bank", Name: "Bank;=1+1"}
	return []*viewv1.Entry{
		{Sequence: 1, Source: "bank", Institution: bank, Entry: &viewv1.Entry_Transaction{Transaction: &connectorv1.Transaction{
			SourceId: "t1", Date: "2026-03-03", Description: "x\t=1+1", Payee: "Coffee;=cmd|' /C calc'!A0",
			Postings: []*connectorv1.Posting{
				{AccountId: "checking", Amount: "-12.50", Currency: "PLN", Memo: "a,@SUM(1)"},
				{AccountId: "food", Amount: "12.50", Currency: "PLN", Memo: "e; =7+7"},
			},
		}}},
		{Sequence: 2, Source: "bank", Institution: bank, Entry: &viewv1.Entry_Transaction{Transaction: &connectorv1.Transaction{
			SourceId: "t2", Date: "2026-03-04", Description: "a\n=2+2", Payee: `f;"=8+8"`,
			Postings: []*connectorv1.Posting{
				{AccountId: "checking", Amount: "-1", Currency: "PLN", Memo: `=HYPERLINK("http://evil.example","x")`},
				{AccountId: "food", Amount: "1", Currency: "PLN", Memo: "g\r=3+3;\t=4+4"},
			},
		}}},
	}
}

// TestSpreadsheetReadsNoFormula writes hostilePage through the view into
// its transactions file, then has LibreOffice Calc (Debian's, headless)
// import that file the ways a spreadsheet user may open it: with ';', ','
// or a tab as the field separator, spaces trimmed or kept, formulas
// evaluated. No cell of any reading may be a formula; the hostile text must
// be there as text (so each reading did split where it should); and in the
// ',' reading the amounts are numbers.
func TestSpreadsheetReadsNoFormula(t *testing.T) {
	soffice := sofficePath(t)
	h := setup(t, davHost, folderPath, Config{})
	if err := h.core.export(t, hostilePage()...); err != nil {
		t.Fatalf("Export: %v", err)
	}
	body, ok := h.dav.read(folderPath + "2026/2026-03-transactions.csv")
	if !ok {
		t.Fatal("the view wrote no transactions file")
	}
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "2026-03-transactions.csv")
	if err := os.WriteFile(csvPath, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	profile := "file://" + filepath.Join(dir, "profile")

	for _, rd := range []struct {
		name  string
		sep   int    // the field separator, as its character code
		shown string // a text cell this reading must show, proof it split there
	}{
		{"semicolon", ';', "'=cmd|"},
		{"comma", ',', "Coffee;'=cmd|"},
		{"tab", '\t', "'=1+1"},
	} {
		for _, trim := range []bool{false, true} {
			name := fmt.Sprintf("%s, trim spaces %t", rd.name, trim)
			// The CSV import filter's options: separator, text delimiter
			// ("), UTF-8, from line 1, no column formats, English (US),
			// quoted fields not forced to text, no special numbers, two
			// export-only tokens, trim spaces, all sheets, evaluate
			// formulas.
			opts := fmt.Sprintf("CSV:%d,34,76,1,,1033,false,false,false,false,%t,-1,true", rd.sep, trim)
			out := filepath.Join(dir, fmt.Sprintf("%s-%t", rd.name, trim))
			cells, err := convert(soffice, profile, opts, csvPath, out)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			shown := false
			for _, c := range cells {
				if c.formula != "" {
					t.Errorf("%s: the cell in row %d, column %d is the formula %q", name, c.row, c.col, c.formula)
				}
				if c.valueType == "string" && strings.HasPrefix(c.text, rd.shown) {
					shown = true
				}
			}
			if !shown {
				t.Errorf("%s: no text cell starts with %q: %v", name, rd.shown, cells)
			}
			if rd.sep == ',' {
				for _, want := range []string{"-12.5", "12.5", "-1", "1"} {
					if !hasNumber(cells, want) {
						t.Errorf("%s: the amount %s is not a number cell: %v", name, want, cells)
					}
				}
			}
		}
	}
}

// sofficePath finds LibreOffice, which make test-deps installs (Debian's
// Calc without a GUI). Without it the test fails: it is the proof that a
// real spreadsheet reads no formula.
func sofficePath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("soffice")
	if err != nil {
		t.Fatalf("this test needs Debian's libreoffice-calc-nogui (soffice), which is not installed: run make test-deps (%v)", err)
	}
	return p
}

// convert has LibreOffice import csvPath with the CSV filter options opts
// and write it as a flat OpenDocument spreadsheet into the folder out, and
// returns its cells. It runs with the private profile, is given two
// minutes, and is killed with every process it started if it takes longer.
func convert(soffice, profile, opts, csvPath, out string) ([]sheetCell, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, soffice, "-env:UserInstallation="+profile, "--headless", "--norestore",
		"--infilter="+opts, "--convert-to", "fods", "--outdir", out, csvPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	log, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("soffice --convert-to fods: %v: %s", err, log)
	}
	name := strings.TrimSuffix(filepath.Base(csvPath), filepath.Ext(csvPath)) + ".fods"
	f, err := os.Open(filepath.Join(out, name))
	if err != nil {
		return nil, fmt.Errorf("soffice wrote no spreadsheet (%v): %s", err, log)
	}
	defer func() { _ = f.Close() }()
	return readCells(f)
}

// The namespaces of the attributes read in a flat OpenDocument spreadsheet.
const (
	nsTable  = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
	nsOffice = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
)

// sheetCell is a cell of a converted spreadsheet that holds something.
type sheetCell struct {
	row, col  int    // from 1
	formula   string // table:formula, "" when the cell is no formula
	valueType string // office:value-type: string, float, ...
	value     string // office:value of a number
	text      string // what the cell shows
}

// String shows the cell in a failure message.
func (c sheetCell) String() string {
	return fmt.Sprintf("R%dC%d[%s %q %q]", c.row, c.col, c.valueType, c.value, c.text)
}

// readCells returns the cells of every table in the flat OpenDocument
// spreadsheet r that hold something.
func readCells(r io.Reader) ([]sheetCell, error) {
	dec := xml.NewDecoder(r)
	var (
		cells    []sheetCell
		cur      *sheetCell
		row, col int
		inP      bool // in a text:p of cur
	)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return cells, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read the converted spreadsheet: %w", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			switch {
			case tok.Name.Space == nsTable && tok.Name.Local == "table":
				row = 0
			case tok.Name.Space == nsTable && tok.Name.Local == "table-row":
				row++
				col = 0
			case tok.Name.Space == nsTable && (tok.Name.Local == "table-cell" || tok.Name.Local == "covered-table-cell"):
				col++
				cur = &sheetCell{row: row, col: col}
				for _, a := range tok.Attr {
					switch {
					case a.Name.Space == nsTable && a.Name.Local == "formula":
						cur.formula = a.Value
					case a.Name.Space == nsOffice && a.Name.Local == "value-type":
						cur.valueType = a.Value
					case a.Name.Space == nsOffice && a.Name.Local == "value":
						cur.value = a.Value
					case a.Name.Space == nsTable && a.Name.Local == "number-columns-repeated":
						var n int
						if _, err := fmt.Sscan(a.Value, &n); err == nil && n > 1 {
							col += n - 1
						}
					}
				}
			case tok.Name.Local == "p" && cur != nil:
				if inP = true; cur.text != "" {
					cur.text += "\n" // a cell of several lines
				}
			case tok.Name.Local == "s" && cur != nil:
				cur.text += " " // text:s, a space ODF keeps as an element
			case tok.Name.Local == "tab" && cur != nil:
				cur.text += "\t"
			}
		case xml.CharData:
			if cur != nil && inP {
				cur.text += string(tok)
			}
		case xml.EndElement:
			if tok.Name.Local == "p" {
				inP = false
			}
			if tok.Name.Space == nsTable && (tok.Name.Local == "table-cell" || tok.Name.Local == "covered-table-cell") && cur != nil {
				if cur.formula != "" || cur.valueType != "" || cur.text != "" {
					cells = append(cells, *cur)
				}
				cur = nil
			}
		}
	}
}

// hasNumber reports whether a number cell of cells holds value.
func hasNumber(cells []sheetCell, value string) bool {
	for _, c := range cells {
		if c.valueType == "float" && c.value == value && c.formula == "" {
			return true
		}
	}
	return false
}
