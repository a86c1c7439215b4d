package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/arkadiuss/openfief/internal/display"
)

// Status is a check's outcome.
type Status string

// The three outcomes. A check the harness cannot judge where it runs, or
// that does not apply to the plugin, is skipped with its reason: never a
// pass.
const (
	Pass Status = "pass"
	Fail Status = "fail"
	Skip Status = "skip"
)

// The checks, in the order the report lists them.
const (
	CheckLabel      = "label"
	CheckServes     = "serves"
	CheckAuth       = "auth"
	CheckSync       = "sync"
	CheckImportFile = "import-file"
	CheckPages      = "pages"
	CheckEgress     = "egress"
	CheckNetwork    = "network"
	CheckSigterm    = "sigterm"
	CheckResources  = "resources"
)

// Checks lists every check's name in the report's order.
var Checks = []string{CheckLabel, CheckServes, CheckAuth, CheckSync, CheckImportFile, CheckPages, CheckEgress, CheckNetwork, CheckSigterm, CheckResources}

// Result is one check's outcome and its one-line reason.
type Result struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Reason string `json:"reason"`
}

// Report is the harness's verdict on one image: every check, in Checks'
// order.
type Report struct {
	Image  string   `json:"image"`
	Checks []Result `json:"checks"`
}

// Failed reports whether any check failed.
func (r Report) Failed() bool {
	for _, c := range r.Checks {
		if c.Status == Fail {
			return true
		}
	}
	return false
}

// Get returns the result of the check named name.
func (r Report) Get(name string) (Result, bool) {
	for _, c := range r.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return Result{}, false
}

// WriteText writes the report as a table: CHECK, RESULT, REASON, then a
// summary line.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "CHECK\tRESULT\tREASON\n")
	counts := map[Status]int{}
	for _, c := range r.Checks {
		counts[c.Status]++
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Status, display.Message(c.Reason))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s: %d passed, %d failed, %d skipped\n", display.Text(r.Image), counts[Pass], counts[Fail], counts[Skip])
	return err
}

// WriteJSON writes the report as one indented JSON document.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// clean makes text from the plugin or its image safe to show on one line:
// control and invisible characters escaped (display.Text), line breaks
// folded, cut to n runes.
func clean(s string, n int) string {
	return display.Limit(strings.Join(strings.Fields(s), " "), n)
}
