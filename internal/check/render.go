package check

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/arkadiuss/openfief/internal/display"
)

// Symbols of the text output: plain characters, never colour, the same on
// a terminal and in a pipe (OF-28), so a script or a person reading a log
// sees what a terminal shows.
const (
	SymbolOK   = "✔"
	SymbolFail = "✖"
	SymbolWarn = "!"
)

func symbol(s Status) string {
	switch s {
	case OK:
		return SymbolOK
	case Warn:
		return SymbolWarn
	}
	return SymbolFail
}

// WriteText prints rs (sorted with Sort) grouped under headings, one line
// per check: its symbol, its name and, when there is one, its reason; a
// failure or warning adds an indented "fix:" line. A summary line ends it.
// Every string is escaped: reasons quote what the cluster said.
func WriteText(w io.Writer, rs []Result) {
	group := ""
	fails, warns := 0, 0
	for _, r := range rs {
		if r.Group != group {
			if group != "" {
				fmt.Fprintln(w)
			}
			group = r.Group
			title := groupTitle[group]
			if title == "" {
				title = display.Text(group)
			}
			fmt.Fprintln(w, title)
		}
		line := "  " + symbol(r.Status) + " " + display.Text(r.Name)
		if r.Reason != "" {
			line += ": " + display.Message(r.Reason)
		}
		fmt.Fprintln(w, line)
		if r.Status != OK && r.Hint != "" {
			fmt.Fprintln(w, "      fix: "+display.Message(r.Hint))
		}
		switch r.Status {
		case OK:
		case Warn:
			warns++
		default:
			fails++
		}
	}
	fmt.Fprintln(w)
	switch {
	case fails > 0:
		fmt.Fprintf(w, "%s %d of %d checks failed, %d warnings\n", SymbolFail, fails, len(rs), warns)
	case warns > 0:
		fmt.Fprintf(w, "%s all %d checks passed, %d warnings\n", SymbolOK, len(rs), warns)
	default:
		fmt.Fprintf(w, "%s all %d checks passed\n", SymbolOK, len(rs))
	}
}

// Document is the JSON output of `openfief check -o json`.
type Document struct {
	// Pre says whether these are the checks before an install (--pre).
	Pre bool `json:"pre"`
	// Passed says whether no check failed.
	Passed bool `json:"passed"`
	// Checks are every check, in the order of Sort.
	Checks []Result `json:"checks"`
	// Isolation is the truth table of --isolation, in IsolationCells
	// order; absent without it.
	Isolation []Row `json:"isolation,omitempty"`
}

// WriteJSON prints rs (sorted with Sort) as one indented Document. Strings
// are escaped as the text output escapes them, so both say the same.
func WriteJSON(w io.Writer, rs []Result, pre bool, table []Row) error {
	doc := Document{Pre: pre, Passed: Passed(rs), Checks: make([]Result, 0, len(rs))}
	for _, r := range rs {
		doc.Checks = append(doc.Checks, Result{Group: r.Group, Name: display.Text(r.Name), Status: r.Status,
			Reason: display.Message(r.Reason), Hint: display.Message(r.Hint)})
	}
	for _, r := range table {
		r.Target, r.Host, r.Query = display.Text(r.Target), display.Text(r.Host), display.Text(r.Query)
		r.Observed, r.Detail = display.Text(r.Observed), display.Message(r.Detail)
		doc.Isolation = append(doc.Isolation, r)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// WriteTable prints the isolation truth table: each cell, what an isolated
// plugin observes, what the probe observed, and a mark on each cell that
// differs. What the probe said is escaped: it ran in a pod.
func WriteTable(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "Isolation truth table")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  \tcell\texpected\tobserved")
	for _, r := range rows {
		mark := SymbolOK
		if !r.OK {
			mark = SymbolFail
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", mark, display.Text(r.Name), r.Expect, display.Text(r.Observed))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
}
