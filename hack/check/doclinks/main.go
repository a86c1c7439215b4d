// Command doclinks fails when a document of the repository points at a file
// that is not there (a relative Markdown link, or a repository path named in
// backticks), or says what the repository contradicts: a paragraph marked
// "Not built:" naming code that exists (status.go), or a block of commands a
// test is said to run that the test does not run (commands.go). make verify
// runs it from the repository's root; it reads only the documents a reader
// of the repository starts from (docs.go lists them).
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: doclinks (run from the repository's root)")
		os.Exit(2)
	}
	root := os.DirFS(".")
	docs, err := Documents(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doclinks:", err)
		os.Exit(1)
	}
	problems, err := Check(root, docs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doclinks:", err)
		os.Exit(1)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "doclinks: %d problem(s) in %d document(s); fix the path, the text or the code\n", len(problems), len(docs))
		os.Exit(1)
	}
	fmt.Printf("doclinks: every link and path in %d documents exists, and no status or command block they hold contradicts the code\n", len(docs))
}
