//go:build heavy

package main

import (
	"bytes"
	"os"
	"os/exec"
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
	var runs []run
	for _, fail := range []bool{false, true, false} {
		r, err := readRun(bytes.NewReader(goTestJSON(t, fail)))
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	if got := runs[1].Output[testID{"github.com/arkadiuss/openfief/hack/soak/testdata/sample", "TestFailsOnRequest"}]; !strings.Contains(strings.Join(got, "\n"), "asked to fail") {
		t.Errorf("the failed test's output was not kept: %q", got)
	}
	var b strings.Builder
	writeTable(&b, tally(runs), runs, false)
	want := `| test | passed | failed in runs | skipped |
| --- | --- | --- | --- |
| github.com/arkadiuss/openfief/hack/soak/testdata/sample.TestFailsOnRequest | 2/3 | 2 | 0 |
| github.com/arkadiuss/openfief/hack/soak/testdata/sample.TestAlwaysPasses | 3/3 | - | 0 |
| github.com/arkadiuss/openfief/hack/soak/testdata/sample.TestSkips | 0/0 | - | 3 |
`
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}
