package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strings"
)

// citation matches the decision ids hack/check/decisions.sh knows; P- takes
// one or two digits, since P-256 is an elliptic curve.
var citation = regexp.MustCompile(`\b(?:D|OF|R)-[0-9]+\b|\bP-[0-9]{1,2}\b`)

// Citation is one decision id in a string literal.
type Citation struct {
	Pos token.Position
	ID  string
}

func (c Citation) String() string {
	return fmt.Sprintf("%s:%d: %s in a string literal", c.Pos.Filename, c.Pos.Line, c.ID)
}

// Find returns the decision ids in the string literals of the Go source src
// (named path); a test file (_test.go) has none by definition.
func Find(path string, src []byte) ([]Citation, error) {
	if strings.HasSuffix(path, "_test.go") {
		return nil, nil
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []Citation
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		for _, id := range citation.FindAllString(lit.Value, -1) {
			out = append(out, Citation{Pos: fset.Position(lit.Pos()), ID: id})
		}
		return true
	})
	return out, nil
}
