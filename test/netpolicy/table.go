package netpolicy

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// Row is one cell and its verdict. Why says, for a computed row, which
// policies decided it; it is printed, never compared.
type Row struct {
	Cell    Cell
	Verdict Verdict
	Why     string
}

// Table is a truth table: rows in the order of Cells.
type Table []Row

// Lookup returns the row of the cell named name.
func (t Table) Lookup(name string) (Row, bool) {
	for _, r := range t {
		if r.Cell.Name == name {
			return r, true
		}
	}
	return Row{}, false
}

// String prints the table aligned, one cell a line, in table order.
func (t Table) String() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "CELL\tCONNECTION\tVERDICT\tWHY")
	for _, r := range t {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.Cell.Name, r.Cell, r.Verdict, r.Why)
	}
	_ = w.Flush() // a strings.Builder never fails
	return b.String()
}

// Diff compares got with t, the table it should equal (Expected, or the
// engine's), cell by cell and returns one line per difference, naming the
// cell: a different verdict, a different connection
// (the same name on other ends or another port), a cell missing from got,
// or a cell got has that t has not. Lines follow t's order, then
// got's extra cells in got's order; nil means the tables agree.
func (t Table) Diff(got Table) []string {
	var out []string
	for _, w := range t {
		g, ok := got.Lookup(w.Cell.Name)
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("cell %q (%s): missing, want %s", w.Cell.Name, w.Cell, w.Verdict))
		case g.Cell != w.Cell:
			out = append(out, fmt.Sprintf("cell %q: connection %s, want %s", w.Cell.Name, g.Cell, w.Cell))
		case g.Verdict != w.Verdict:
			out = append(out, fmt.Sprintf("cell %q (%s): %s, want %s%s", w.Cell.Name, w.Cell, g.Verdict, w.Verdict, why(g)))
		}
	}
	for _, g := range got {
		if _, ok := t.Lookup(g.Cell.Name); !ok {
			out = append(out, fmt.Sprintf("cell %q (%s): not in the expected table (%s)", g.Cell.Name, g.Cell, g.Verdict))
		}
	}
	return out
}

func why(r Row) string {
	if r.Why == "" {
		return ""
	}
	return " (" + r.Why + ")"
}
