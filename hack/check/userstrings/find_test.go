package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFind(t *testing.T) {
	src := `package x

// Run carries out D-16 and OF-11: comments may cite.
func Run() {
	flagHelp("--purge", "also delete the Secrets (D-58)")
	const long = ` + "`" + `Manage plugins.
The operator runs what both hold (D-16, OF-2).` + "`" + `
	_ = "P-256 is a curve, P-33 a proposal; ID-12 and D-x are neither"
	_ = 'D'
}
`
	got, err := Find("x.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, c := range got {
		lines = append(lines, c.String())
	}
	want := []string{
		"x.go:5: D-58 in a string literal",
		"x.go:6: D-16 in a string literal",
		"x.go:6: OF-2 in a string literal",
		"x.go:8: P-33 in a string literal",
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("Find (-want +got):\n%s", diff)
	}
	if got, err := Find("x_test.go", []byte(src)); err != nil || len(got) != 0 {
		t.Errorf("a test file: %v, %v; want none", got, err)
	}
	if _, err := Find("bad.go", []byte("package x\nfunc {")); err == nil {
		t.Error("a file that does not parse: no error")
	}
}
