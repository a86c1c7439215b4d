package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A document that says a test runs the commands of a block marks the block
// with a comment on the line before it (blank lines between are allowed):
//
//	<!-- doclinks: TestPlatformLifecycle runs each openfief command of the next block -->
//
// Every line of the block that starts with the program (openfief) must then
// be run by the test: some call or composite literal in the test function's
// body has the command's words as its string literals, in order, and every
// flag the line names. Values and placeholders are not compared, so the
// block can say `--overlay release` where the test passes a folder of its
// own. A command the test runs with a positional argument held in a
// variable (`plugin approve NAME` as run("plugin", "approve", name)) matches
// on the words it spells out, two at least.
var runMarker = regexp.MustCompile(`^\s*<!--\s*doclinks:\s*(Test\w+) runs each (\S+) command of the next block\s*-->\s*$`)

// testName is a test function named in backticks, `TestPlatformLifecycle`.
var testName = regexp.MustCompile("`(Test[A-Z]\\w*)`")

// shellEnd is where a command of a block ends: a comment, a redirection, a
// pipe or another command.
var shellEnd = regexp.MustCompile(`\s(#|>|<|\||&&|;)|^#`)

// command is one command of a block: its words before the first flag and
// the flags it names.
type command struct {
	line  int // 1-based, in the document
	text  string
	words []string
	flags []string
}

// parseCommand splits a block's line into the program and its command, or
// returns "" when the line holds no command.
func parseCommand(line string) (string, command) {
	if loc := shellEnd.FindStringIndex(line); loc != nil {
		line = line[:loc[0]]
	}
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return "", command{}
	}
	c := command{text: strings.Join(fields, " ")}
	c.words, c.flags = wordsAndFlags(fields[1:])
	return fields[0], c
}

// wordsAndFlags returns the arguments before the first flag and every
// flag's name (without a value given with =).
func wordsAndFlags(args []string) (words, flags []string) {
	inFlags := false
	for _, a := range args {
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			inFlags = true
			name, _, _ := strings.Cut(a, "=")
			flags = append(flags, name)
			continue
		}
		if !inFlags {
			words = append(words, a)
		}
	}
	return words, flags
}

// runBy reports whether an invocation of the test, given as its string
// literals, runs c: the same words (or, from two on, the first of them, the
// rest held in variables) and at least c's flags.
func (c command) runBy(literals []string) bool {
	words, flags := wordsAndFlags(literals)
	switch {
	case slices.Equal(words, c.words):
	case len(words) >= 2 && len(words) < len(c.words) && slices.Equal(words, c.words[:len(words)]):
	default:
		return false
	}
	for _, f := range c.flags {
		if !slices.Contains(flags, f) {
			return false
		}
	}
	return true
}

// commandBlock is a fenced block of a document with the test that the
// marker before it says runs its commands.
type commandBlock struct {
	test, program string
	commands      []command
}

// checkCommandBlocks checks the marked blocks of a document against the
// tests they name, and refuses a block that a paragraph beside it says a
// test runs ("`TestX` runs these commands") when no block of the document
// is marked for that test, since nothing would hold the two together.
func (idx *repoIndex) checkCommandBlocks(doc string, data []byte) []Problem {
	var problems []Problem
	lines := strings.Split(string(data), "\n")
	// A paragraph may name a test beside another block than its own: the
	// claim is held when some block of the document is marked for it.
	markedTests := map[string]bool{}
	for _, l := range lines {
		if m := runMarker.FindStringSubmatch(l); m != nil {
			markedTests[m[1]] = true
		}
	}
	var marked *commandBlock
	markerLine := 0
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimLeft(lines[i], " \t")
		if m := runMarker.FindStringSubmatch(lines[i]); m != nil {
			marked, markerLine = &commandBlock{test: m[1], program: m[2]}, i+1
			continue
		}
		if !strings.HasPrefix(trimmed, "```") && !strings.HasPrefix(trimmed, "~~~") {
			if strings.TrimSpace(trimmed) != "" && marked != nil {
				problems = append(problems, Problem{Doc: doc, Line: markerLine, Target: marked.test, Why: "the marker is not followed by a fenced block"})
				marked = nil
			}
			continue
		}
		// A fenced block: lines[start:end] is its body.
		fence, start := trimmed[:3], i+1
		end := start
		for end < len(lines) && !strings.HasPrefix(strings.TrimLeft(lines[end], " \t"), fence) {
			end++
		}
		i = end
		if marked == nil {
			if name := claimedTest(lines, start-1, end); name != "" && !markedTests[name] {
				problems = append(problems, Problem{Doc: doc, Line: start, Target: "`" + name + "`",
					Why: "the text beside this block says the test runs its commands, but no doclinks marker holds them together; put <!-- doclinks: " + name + " runs each PROGRAM command of the next block --> before the block"})
			}
			continue
		}
		for n := start; n < end; n++ {
			program, c := parseCommand(lines[n])
			if program != marked.program {
				continue
			}
			c.line = n + 1
			marked.commands = append(marked.commands, c)
		}
		problems = append(problems, idx.checkBlockRun(doc, markerLine, *marked)...)
		marked = nil
	}
	if marked != nil {
		problems = append(problems, Problem{Doc: doc, Line: markerLine, Target: marked.test, Why: "the marker is not followed by a fenced block"})
	}
	return problems
}

// claimedTest returns the test that the paragraph before the fence at open
// or after the one at closing names as running commands, or "".
func claimedTest(lines []string, open, closing int) string {
	var before, after []string
	i := open - 1
	for i >= 0 && strings.TrimSpace(lines[i]) == "" {
		i--
	}
	for ; i >= 0 && strings.TrimSpace(lines[i]) != ""; i-- {
		before = append(before, lines[i])
	}
	slices.Reverse(before)
	i = closing + 1
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
		after = append(after, lines[i])
	}
	for _, para := range [][]string{before, after} {
		text := strings.Join(para, " ")
		if m := testName.FindStringSubmatch(text); m != nil && strings.Contains(text, "commands") {
			return m[1]
		}
	}
	return ""
}

// checkBlockRun returns a problem for each command of b that b's test does
// not run, or one for a test that is not there.
func (idx *repoIndex) checkBlockRun(doc string, markerLine int, b commandBlock) []Problem {
	if len(b.commands) == 0 {
		return []Problem{{Doc: doc, Line: markerLine, Target: b.test, Why: "the block after the marker holds no " + b.program + " command"}}
	}
	file, invocations, err := idx.testInvocations(b.test)
	if err != nil {
		return []Problem{{Doc: doc, Line: markerLine, Target: b.test, Why: err.Error()}}
	}
	var problems []Problem
	for _, c := range b.commands {
		if !slices.ContainsFunc(invocations, c.runBy) {
			problems = append(problems, Problem{Doc: doc, Line: c.line, Target: c.text,
				Why: fmt.Sprintf("%s (%s) does not run this command, which the marker says it runs: run it there, or take it out of the block", b.test, file)})
		}
	}
	return problems
}

// testInvocations finds the test function name in the repository's test
// files and returns its file and, for every call and composite literal in
// its body, the string literals among its direct arguments or elements.
func (idx *repoIndex) testInvocations(name string) (string, [][]string, error) {
	var files []string
	for p := range idx.paths {
		if strings.HasSuffix(p, "_test.go") {
			files = append(files, p)
		}
	}
	slices.Sort(files)
	decl := "func " + name + "("
	for _, f := range files {
		data, err := fs.ReadFile(idx.root, f)
		if err != nil {
			return "", nil, err
		}
		if !strings.Contains(string(data), decl) {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), path.Base(f), data, parser.SkipObjectResolution)
		if err != nil {
			return "", nil, fmt.Errorf("parsing %s: %w", f, err)
		}
		for _, d := range parsed.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Name.Name != name || fn.Body == nil {
				continue
			}
			return f, literalRuns(fn.Body), nil
		}
	}
	return "", nil, fmt.Errorf("no test function %s in the repository", name)
}

// literalRuns collects, for every call and composite literal under n, its
// string literal arguments or elements, in order.
func literalRuns(n ast.Node) [][]string {
	var runs [][]string
	ast.Inspect(n, func(n ast.Node) bool {
		var args []ast.Expr
		switch e := n.(type) {
		case *ast.CallExpr:
			args = e.Args
		case *ast.CompositeLit:
			args = e.Elts
		default:
			return true
		}
		var lits []string
		for _, a := range args {
			if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					lits = append(lits, s)
				}
			}
		}
		if len(lits) > 0 {
			runs = append(runs, lits)
		}
		return true
	})
	return runs
}
