package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// event is the part of a `go test -json` (test2json) line the tally reads.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// testID names one test: its package and its name (subtests included, as
// "TestX/sub").
type testID struct {
	Package string
	Test    string
}

func (id testID) String() string { return id.Package + "." + id.Test }

// outcome is how one test ended in one run.
type outcome string

const (
	passed  outcome = "pass"
	failed  outcome = "fail"
	skipped outcome = "skip"
)

// run is what one `go test -json` run reported: each test's outcome and the
// output lines of the tests that failed (kept to show why).
type run struct {
	Outcomes map[testID]outcome
	Output   map[testID][]string
	// PackageFailures names packages that failed without a failing test
	// (a build error, a panic in TestMain, a timeout).
	PackageFailures []string
}

// maxOutputLines bounds the output kept per failed test and run.
const maxOutputLines = 200

// readRun decodes a test2json stream. Lines that are not JSON (the go
// command's own messages) are ignored.
func readRun(r io.Reader) (run, error) {
	res := run{Outcomes: map[testID]outcome{}, Output: map[testID][]string{}}
	out := map[testID][]string{}
	pkgFailed := map[string]bool{}
	pkgHasFailingTest := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			continue
		}
		id := testID{e.Package, e.Test}
		switch e.Action {
		case "output":
			if e.Test != "" && len(out[id]) < maxOutputLines {
				out[id] = append(out[id], strings.TrimRight(e.Output, "\n"))
			}
		case "pass", "fail", "skip":
			if e.Test == "" {
				if e.Action == "fail" {
					pkgFailed[e.Package] = true
				}
				continue
			}
			res.Outcomes[id] = outcome(e.Action)
			if e.Action == "fail" {
				pkgHasFailingTest[e.Package] = true
				res.Output[id] = out[id]
			}
		}
	}
	if err := sc.Err(); err != nil {
		return res, fmt.Errorf("read go test -json output: %w", err)
	}
	for p := range pkgFailed {
		if !pkgHasFailingTest[p] {
			res.PackageFailures = append(res.PackageFailures, p)
		}
	}
	sort.Strings(res.PackageFailures)
	return res, nil
}

// row is one test's line in the table: how often it ran, passed and failed,
// and in which runs (1-based) it failed.
type row struct {
	ID         testID
	Runs       int
	Passed     int
	Skipped    int
	FailedRuns []int
}

// Rate is the share of the runs that did not skip in which the test passed.
func (r row) Rate() float64 {
	n := r.Passed + len(r.FailedRuns)
	if n == 0 {
		return 1
	}
	return float64(r.Passed) / float64(n)
}

// tally folds runs into one row per test: flaky tests (lowest pass rate)
// first, then by name, so the output is the same for the same runs.
func tally(runs []run) []row {
	rows := map[testID]*row{}
	for i, r := range runs {
		for id, o := range r.Outcomes {
			w := rows[id]
			if w == nil {
				w = &row{ID: id}
				rows[id] = w
			}
			w.Runs++
			switch o {
			case passed:
				w.Passed++
			case skipped:
				w.Skipped++
			case failed:
				w.FailedRuns = append(w.FailedRuns, i+1)
			}
		}
	}
	out := make([]row, 0, len(rows))
	for _, w := range rows {
		sort.Ints(w.FailedRuns)
		out = append(out, *w)
	}
	sort.Slice(out, func(i, j int) bool {
		if ri, rj := out[i].Rate(), out[j].Rate(); ri != rj {
			return ri < rj
		}
		return out[i].ID.String() < out[j].ID.String()
	})
	return out
}

// writeTable prints the tally as a Markdown table (top-level tests only,
// unless all is set), then the packages that failed outside any test.
func writeTable(w io.Writer, rows []row, runs []run, all bool) {
	fmt.Fprintf(w, "| test | passed | failed in runs | skipped |\n| --- | --- | --- | --- |\n")
	for _, r := range rows {
		if !all && strings.Contains(r.ID.Test, "/") {
			continue
		}
		failedIn := "-"
		if len(r.FailedRuns) > 0 {
			s := make([]string, len(r.FailedRuns))
			for i, n := range r.FailedRuns {
				s[i] = fmt.Sprint(n)
			}
			failedIn = strings.Join(s, ", ")
		}
		fmt.Fprintf(w, "| %s | %d/%d | %s | %d |\n", r.ID, r.Passed, r.Passed+len(r.FailedRuns), failedIn, r.Skipped)
	}
	for i, r := range runs {
		for _, p := range r.PackageFailures {
			fmt.Fprintf(w, "\nrun %d: package %s failed outside any test (build error, TestMain, panic or timeout)\n", i+1, p)
		}
	}
}
