// Command userstrings fails when a Go string literal outside the tests cites
// a decision (D-nn, OF-n, R-nn, P-n): flag help, CLI help, errors and log
// messages reach people who never see docs/decisions.md, so they say the
// reason itself. Comments may cite decisions; hack/check/decisions.sh runs
// this command on the repository's Go files.
//
// Usage: userstrings FILE...
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: userstrings FILE...")
		os.Exit(2)
	}
	var found []Citation
	for _, path := range os.Args[1:] {
		src, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "userstrings:", err)
			os.Exit(1)
		}
		cs, err := Find(path, src)
		if err != nil {
			fmt.Fprintln(os.Stderr, "userstrings:", err)
			os.Exit(1)
		}
		found = append(found, cs...)
	}
	for _, c := range found {
		fmt.Println(c)
	}
	if len(found) > 0 {
		fmt.Fprintln(os.Stderr, "userstrings: user-facing strings cite decisions; state the reason in the string and cite the decision in a comment")
		os.Exit(1)
	}
}
