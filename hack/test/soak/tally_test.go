package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goTestJSON runs the sample package for real and returns its test2json
// stream; fail makes TestFailsOnRequest fail.
func goTestJSON(t *testing.T, fail bool) []byte {
	t.Helper()
	cmd := exec.Command("go", "test", "-json", "-count=1", "./testdata/sample")
	cmd.Env = append(os.Environ(), "SOAK_SAMPLE_FAIL=")
	if fail {
		cmd.Env = append(cmd.Env, "SOAK_SAMPLE_FAIL=1")
	}
	out, err := cmd.Output()
	if err != nil && !fail {
		t.Fatalf("go test on the sample: %v\n%s", err, out)
	}
	return out
}

func TestTallyOfRealRuns(t *testing.T) {
	// go test's cache sees the files this process opens, not those the
	// child go test reads: open the sample's so an edit reruns the test.
	samples, err := filepath.Glob("testdata/sample/*.go")
	if err != nil || len(samples) == 0 {
		t.Fatalf("the sample's files: %v, %d", err, len(samples))
	}
	for _, f := range samples {
		if _, err := os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	var runs []run
	for _, fail := range []bool{false, true, false} {
		r, err := readRun(bytes.NewReader(goTestJSON(t, fail)))
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	if got := runs[1].Output[testID{"github.com/arkadiuss/openfief/hack/test/soak/testdata/sample", "TestFailsOnRequest"}]; !strings.Contains(strings.Join(got, "\n"), "asked to fail") {
		t.Errorf("the failed test's output was not kept: %q", got)
	}
	var b strings.Builder
	writeTable(&b, tally(runs), runs, false)
	want := `| test | passed | failed in runs | skipped |
| --- | --- | --- | --- |
| github.com/arkadiuss/openfief/hack/test/soak/testdata/sample.TestFailsOnRequest | 2/3 | 2 | 0 |
| github.com/arkadiuss/openfief/hack/test/soak/testdata/sample.TestAlwaysPasses | 3/3 | - | 0 |
| github.com/arkadiuss/openfief/hack/test/soak/testdata/sample.TestSkips | 0/0 | - | 3 |
`
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestPackageFailureOutsideTests(t *testing.T) {
	stream := `{"Action":"start","Package":"p"}
{"Action":"output","Package":"p","Output":"panic in TestMain\n"}
{"Action":"fail","Package":"p"}
`
	r, err := readRun(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.PackageFailures) != 1 || r.PackageFailures[0] != "p" {
		t.Fatalf("package failures = %v, want [p]", r.PackageFailures)
	}
	var b strings.Builder
	writeTable(&b, tally([]run{r}), []run{r}, false)
	if !strings.Contains(b.String(), "run 1: package p failed outside any test") {
		t.Errorf("table does not name the failed package:\n%s", b.String())
	}
}
