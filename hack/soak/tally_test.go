package main

import (
	"strings"
	"testing"
)

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
