package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
)

// A paragraph that says part of a decision or a document is missing begins
// with a status marker, "Not built:", "Not done:" or "Planned:" (bold or
// not), and names what is missing in backticks where it would be code: a
// path of the repository, `make TARGET`, `package.Name` (a declaration of a
// Go package of the repository) or `TestName`. Once any of those exists,
// the paragraph contradicts the code, and the check says so. Other names in
// backticks (a flag, a command of another tool) are not looked up; prose
// outside a marked paragraph is not read. The paths such a paragraph names
// are the ones the link check does not require to exist.
var statusMarker = regexp.MustCompile(`^\s*(?:[-*]\s+)?(?:\*\*)?(Not built|Not done|Planned)(?:\*\*)?:`)

var (
	// makeTarget is `make TARGET`, with or without variables after it.
	makeTarget = regexp.MustCompile(`^make\s+([A-Za-z0-9_.-]+)`)
	// goName is `package.Name` or `package.Type.Method`, with or without ().
	goName = regexp.MustCompile(`^([a-z][a-z0-9]*)\.([A-Z]\w*)(?:\.([A-Z]\w*))?(?:\(\))?$`)
	// testFunc is `TestName`.
	testFunc = regexp.MustCompile(`^(Test[A-Z]\w*)$`)
	// listItem begins an item of a list, which ends the paragraph before.
	listItem = regexp.MustCompile(`^\s*([-*+]|[0-9]+\.)\s`)
	// makeRule is a rule's target list in a Makefile.
	makeRule = regexp.MustCompile(`^([A-Za-z0-9_.%/ -]+):(?:[^=]|$)`)
)

// statusParagraphs returns, for each 1-based line of a document that is in
// a paragraph begun by a status marker, the marker.
func statusParagraphs(data []byte) map[int]string {
	lines := map[int]string{}
	marker, inParagraph := "", false
	var code fences
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if code.in(line) {
			inParagraph = false // a fence ends the paragraph
			continue
		}
		switch m := statusMarker.FindStringSubmatch(line); {
		case m != nil:
			marker, inParagraph = m[1], true
		case strings.TrimSpace(line) == "" || heading.MatchString(line) || listItem.MatchString(line):
			inParagraph = false
		}
		if inParagraph {
			lines[n] = marker
		}
	}
	return lines
}

// checkStatusMarkers returns a problem for every name in a marked
// paragraph of doc that exists.
func (idx *repoIndex) checkStatusMarkers(doc string, data []byte) []Problem {
	var problems []Problem
	marked := statusParagraphs(data)
	for i, line := range strings.Split(string(data), "\n") {
		marker, ok := marked[i+1]
		if !ok {
			continue
		}
		for _, span := range codeSpan.FindAllStringSubmatch(line, -1) {
			if what := idx.existing(strings.TrimSpace(span[1])); what != "" {
				problems = append(problems, Problem{Doc: doc, Line: i + 1, Target: "`" + span[1] + "`",
					Why: fmt.Sprintf("the paragraph is marked %q, but %s exists: update the status", marker+":", what)})
			}
		}
	}
	return problems
}

// existing says what the name in backticks names in the repository (a
// file, a make target, a Go declaration, a test), or "" when it names
// nothing there.
func (idx *repoIndex) existing(name string) string {
	if m := makeTarget.FindStringSubmatch(name); m != nil {
		if idx.makeTargets()[m[1]] {
			return "the Makefile's target " + m[1]
		}
		return ""
	}
	if m := testFunc.FindStringSubmatch(name); m != nil {
		if _, _, err := idx.testInvocations(m[1]); err == nil {
			return "the test " + m[1]
		}
		return ""
	}
	if m := goName.FindStringSubmatch(name); m != nil {
		decl := m[2]
		if m[3] != "" {
			decl += "." + m[3]
		}
		if dir := idx.declaringPackage(m[1], decl); dir != "" {
			return "the declaration " + decl + " in " + dir
		}
		return ""
	}
	if p := strings.TrimSuffix(strings.TrimPrefix(name, "./"), "/"); strings.Contains(p, "/") && !strings.ContainsAny(p, " *?<>$") {
		if idx.exists(".", p) {
			return "the path " + p
		}
	}
	return ""
}

// makeTargets returns the targets of the Makefile at the root, read once.
func (idx *repoIndex) makeTargets() map[string]bool {
	if idx.targets != nil {
		return idx.targets
	}
	idx.targets = map[string]bool{}
	data, err := fs.ReadFile(idx.root, "Makefile")
	if err != nil {
		return idx.targets
	}
	for _, line := range strings.Split(string(data), "\n") {
		if m := makeRule.FindStringSubmatch(line); m != nil && !strings.HasPrefix(line, "\t") {
			for _, t := range strings.Fields(m[1]) {
				idx.targets[t] = true
			}
		}
	}
	return idx.targets
}

// declaringPackage returns the folder of a Go package named pkg (by its
// folder's name) whose non-test files declare decl at the top level: a
// function, type, variable or constant, or Type.Method; "" when none does.
func (idx *repoIndex) declaringPackage(pkg, decl string) string {
	var dirs []string
	for d := range idx.dirs {
		if path.Base(d) == pkg {
			dirs = append(dirs, d)
		}
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		entries, err := fs.ReadDir(idx.root, d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
				continue
			}
			data, err := fs.ReadFile(idx.root, path.Join(d, n))
			if err != nil {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), n, data, parser.SkipObjectResolution)
			if err != nil {
				continue
			}
			if slices.Contains(declarations(f), decl) {
				return d
			}
		}
	}
	return ""
}

// declarations lists the top-level names of a Go file, methods as
// Type.Method.
func declarations(f *ast.File) []string {
	var names []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			name := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) == 1 {
				t := d.Recv.List[0].Type
				if star, ok := t.(*ast.StarExpr); ok {
					t = star.X
				}
				if idx, ok := t.(*ast.IndexExpr); ok {
					t = idx.X
				}
				if id, ok := t.(*ast.Ident); ok {
					name = id.Name + "." + name
				}
			}
			names = append(names, name)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					names = append(names, s.Name.Name)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	return names
}
