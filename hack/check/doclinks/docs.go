package main

import (
	"io/fs"
	"slices"
)

// documentPatterns are the documents checked: the ones a reader of the
// repository starts from and is sent to.
var documentPatterns = []string{
	"README.md",
	"SECURITY.md",
	"docs/*.md",
	"hack/README.md",
	"plugins/README.md",
	"plugins/*/README.md",
	"sdk/README.md",
	"sdk/*/README.md",
}

// Documents lists the documents of root that documentPatterns match, sorted.
func Documents(root fs.FS) ([]string, error) {
	var docs []string
	for _, pattern := range documentPatterns {
		matches, err := fs.Glob(root, pattern)
		if err != nil {
			return nil, err
		}
		docs = append(docs, matches...)
	}
	slices.Sort(docs)
	return slices.Compact(docs), nil
}
