package check

import (
	"encoding/json"
	"fmt"
	"io"

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
}

// WriteJSON prints rs (sorted with Sort) as one indented Document. Strings
// are escaped as the text output escapes them, so both say the same.
func WriteJSON(w io.Writer, rs []Result, pre bool) error {
	doc := Document{Pre: pre, Passed: Passed(rs), Checks: make([]Result, 0, len(rs))}
	for _, r := range rs {
		doc.Checks = append(doc.Checks, Result{Group: r.Group, Name: display.Text(r.Name), Status: r.Status,
			Reason: display.Message(r.Reason), Hint: display.Message(r.Hint)})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
