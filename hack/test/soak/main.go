// Command soak runs test packages N times and prints each test's pass rate,
// so a flaky test is measured, not guessed. `make soak N=10` runs it on the
// end-to-end, real-node and fault suites.
//
// Each run is one `go test -json -count=1` of all the packages; the table
// lists every top-level test with passed/ran and the runs it failed in, and
// the output of every failed test is written to DIR/run-N.log. Exit status:
// 0 when every test passed in every run, 1 otherwise, 2 when soak itself
// could not run.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	n := flag.Int("n", 10, "how many times to run the packages")
	timeout := flag.Duration("timeout", 45*time.Minute, "go test -timeout for each run")
	runRE := flag.String("run", "", "go test -run: only tests matching this regular expression")
	tags := flag.String("tags", "", "go test -tags")
	logDir := flag.String("logs", ".cache/soak", "directory for each run's failed-test output")
	all := flag.Bool("subtests", false, "list subtests too, not only top-level tests")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: soak [flags] package...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *n < 1 || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := os.MkdirAll(*logDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	args := []string{"test", "-json", "-count=1", "-timeout", timeout.String()}
	if *runRE != "" {
		args = append(args, "-run", *runRE)
	}
	if *tags != "" {
		args = append(args, "-tags", *tags)
	}
	args = append(args, flag.Args()...)

	var runs []run
	for i := 1; i <= *n; i++ {
		start := time.Now()
		r, err := soakOnce(args)
		if err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
			os.Exit(2)
		}
		runs = append(runs, r)
		nFailed := len(r.Output) + len(r.PackageFailures)
		fmt.Fprintf(os.Stderr, "soak: run %d/%d: %d tests, %d failed, %s\n", i, *n, len(r.Outcomes), nFailed, time.Since(start).Round(time.Second))
		if err := writeFailures(filepath.Join(*logDir, fmt.Sprintf("run-%d.log", i)), r); err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
			os.Exit(2)
		}
	}
	fmt.Printf("%d runs of go %s\n\n", *n, strings.Join(args, " "))
	rows := tally(runs)
	writeTable(os.Stdout, rows, runs, *all)
	for _, r := range runs {
		if len(r.Output) > 0 || len(r.PackageFailures) > 0 {
			fmt.Printf("\nfailed tests' output: %s/run-N.log\n", *logDir)
			os.Exit(1)
		}
	}
}

// soakOnce runs go test once and reads its JSON stream. A non-zero exit is
// expected when a test fails; it is an error only when nothing was reported.
func soakOnce(args []string) (run, error) {
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = io.MultiWriter(&stderr, os.Stderr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return run{}, err
	}
	if err := cmd.Start(); err != nil {
		return run{}, err
	}
	r, readErr := readRun(stdout)
	waitErr := cmd.Wait()
	if readErr != nil {
		return r, readErr
	}
	if waitErr != nil && len(r.Outcomes) == 0 && len(r.PackageFailures) == 0 {
		return r, fmt.Errorf("go test reported nothing: %w", waitErr)
	}
	return r, nil
}

// writeFailures writes the output of each failed test of one run.
func writeFailures(path string, r run) error {
	var b strings.Builder
	for _, row := range tally([]run{r}) {
		lines, ok := r.Output[row.ID]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "=== %s\n%s\n\n", row.ID, strings.Join(lines, "\n"))
	}
	for _, p := range r.PackageFailures {
		fmt.Fprintf(&b, "=== package %s failed outside any test\n\n", p)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
