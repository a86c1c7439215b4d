package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Problem is one reference of a document that leads nowhere, or one claim of
// a document that the repository contradicts.
type Problem struct {
	Doc    string // the document, relative to the root
	Line   int    // 1-based
	Target string // the link or path as written
	Why    string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", p.Doc, p.Line, p.Target, p.Why)
}

var (
	// inlineLink is a Markdown link or image, [text](target "title").
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// referenceLink is a link reference definition, [label]: target.
	referenceLink = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
	// codeSpan is text in single backticks.
	codeSpan = regexp.MustCompile("`([^`]+)`")
	// heading is an ATX heading, "## Text".
	heading = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*)$`)
	// htmlAnchor is an explicit anchor, <a id="of-12"></a> or <a name="x">.
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	// lineSuffix is a :line or :line:column after a file name.
	lineSuffix = regexp.MustCompile(`(:[0-9]+)+$`)
)

// pathExtensions are the endings that make a path in backticks (one with a
// slash) a file of the repository even without a known top-level folder.
var pathExtensions = []string{".md", ".go", ".yaml", ".yml", ".sh", ".json", ".proto", ".mod", ".sum", ".txt", ".png"}

// notPaths are names in backticks that look like paths of the repository but
// are something else: the Plugin kind's subresources, named like a folder.
var notPaths = map[string]bool{
	"plugins/status":     true,
	"plugins/finalizers": true,
}

// Check reads every document of docs in root and returns the references that
// lead nowhere and the claims the repository contradicts (a status marker
// naming what exists, status.go; a command a marked block says a test runs
// and it does not, commands.go), in document order.
func Check(root fs.FS, docs []string) ([]Problem, error) {
	idx, err := indexRepo(root)
	if err != nil {
		return nil, err
	}
	var problems []Problem
	for _, doc := range docs {
		data, err := fs.ReadFile(root, doc)
		if err != nil {
			return nil, err
		}
		problems = append(problems, idx.checkDoc(doc, data)...)
		problems = append(problems, idx.checkStatusMarkers(doc, data)...)
		problems = append(problems, idx.checkCommandBlocks(doc, data)...)
	}
	return problems, nil
}

// repoIndex is what exists in the repository: every file and folder, and the
// top-level folders.
type repoIndex struct {
	root     fs.FS
	paths    map[string]bool // every file and folder, slash-separated
	dirs     map[string]bool
	topLevel map[string]bool
	anchors  map[string]map[string]bool // per Markdown file, filled on demand
	targets  map[string]bool            // the Makefile's targets, read on demand
}

// skippedDirs are folders of build output and tools' state, never named by a
// document as part of the repository.
var skippedDirs = map[string]bool{".git": true, ".bin": true, ".cache": true, ".bench": true, "node_modules": true}

func indexRepo(root fs.FS) (*repoIndex, error) {
	idx := &repoIndex{root: root, paths: map[string]bool{}, dirs: map[string]bool{}, topLevel: map[string]bool{}, anchors: map[string]map[string]bool{}}
	err := fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if d.IsDir() {
			if skippedDirs[d.Name()] {
				return fs.SkipDir
			}
			idx.dirs[p] = true
			if !strings.Contains(p, "/") && !strings.HasPrefix(p, ".") {
				idx.topLevel[p] = true
			}
		}
		idx.paths[p] = true
		return nil
	})
	return idx, err
}

func (idx *repoIndex) checkDoc(doc string, data []byte) []Problem {
	var problems []Problem
	dir := path.Dir(doc)
	notBuilt := statusParagraphs(data) // paths there name what is not there yet
	var code fences
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if code.in(line) {
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			if _, ok := notBuilt[n]; ok {
				break
			}
			if why := idx.checkCodePath(dir, m[1]); why != "" {
				problems = append(problems, Problem{Doc: doc, Line: n, Target: "`" + m[1] + "`", Why: why})
			}
		}
		prose := codeSpan.ReplaceAllString(line, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(prose, -1) {
			targets = append(targets, m[1])
		}
		if m := referenceLink.FindStringSubmatch(prose); m != nil {
			targets = append(targets, m[1])
		}
		for _, t := range targets {
			if why := idx.checkLink(doc, t); why != "" {
				problems = append(problems, Problem{Doc: doc, Line: n, Target: t, Why: why})
			}
		}
	}
	return problems
}

// checkLink returns why a Markdown link target of doc leads nowhere (no such
// file, or no such heading for a #fragment of a Markdown file), or "" when it
// is fine or not a file of the repository.
func (idx *repoIndex) checkLink(doc, target string) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	target, fragment, _ := strings.Cut(target, "#")
	target, _, _ = strings.Cut(target, "?")
	if unescaped, err := url.PathUnescape(target); err == nil {
		target = unescaped
	}
	var p string
	switch {
	case target == "":
		p = doc // #fragment: a heading of doc itself
	case strings.HasPrefix(target, "/"):
		p = path.Clean(strings.TrimPrefix(target, "/"))
	default:
		p = path.Join(path.Dir(doc), target)
	}
	if p == ".." || strings.HasPrefix(p, "../") {
		return "the link leaves the repository"
	}
	if p != "." && !idx.paths[p] {
		return "no such file or folder"
	}
	if fragment == "" || path.Ext(p) != ".md" {
		return ""
	}
	anchors, err := idx.anchorsOf(p)
	if err != nil {
		return "cannot read it: " + err.Error()
	}
	if !anchors[fragment] {
		return "no heading of " + p + " has the anchor #" + fragment
	}
	return ""
}

// anchorsOf returns the anchors of the headings of the Markdown file p, as
// GitHub makes them, cached.
func (idx *repoIndex) anchorsOf(p string) (map[string]bool, error) {
	if a, ok := idx.anchors[p]; ok {
		return a, nil
	}
	data, err := fs.ReadFile(idx.root, p)
	if err != nil {
		return nil, err
	}
	a := headingAnchors(data)
	idx.anchors[p] = a
	return a, nil
}

// headingAnchors returns the anchors of a Markdown document: its explicit
// <a id> and <a name> anchors, and those GitHub gives its ATX headings (the
// text lowercased, every character but letters, digits, spaces, hyphens and
// underscores dropped, spaces made hyphens, and -1, -2... after repeats).
func headingAnchors(data []byte) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	var code fences
	for _, line := range strings.Split(string(data), "\n") {
		if code.in(line) {
			continue
		}
		for _, a := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[a[1]] = true
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		text := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(m[1]), "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

// checkCodePath returns why a name in backticks in a document in dir, when it
// looks like a path of the repository, names nothing; "" when it exists or
// does not look like a path of the repository (commands, URLs, globs,
// placeholders, flags, Go import paths of other modules).
func (idx *repoIndex) checkCodePath(dir, text string) string {
	p := strings.TrimSpace(text)
	if p == "" || strings.ContainsAny(p, " \t*?[]{}<>$|=,;()'\"\\@~") || strings.Contains(p, "://") ||
		strings.HasPrefix(p, "-") || strings.HasPrefix(p, "/") || strings.HasPrefix(p, ".") && !strings.HasPrefix(p, "./") {
		return ""
	}
	p = strings.TrimPrefix(p, "./")
	p, _, _ = strings.Cut(p, "#")
	p = lineSuffix.ReplaceAllString(p, "")
	p = strings.TrimSuffix(p, "/...")
	p = strings.TrimSuffix(p, "/")
	if p == "" || notPaths[p] {
		return ""
	}
	first, _, hasSlash := strings.Cut(p, "/")
	if !hasSlash {
		return "" // signers.json, config.json: a kind of file, not a path
	}
	known := idx.topLevel[first]
	if !known && !hasExtension(p) {
		return ""
	}
	if idx.exists(dir, p) {
		return ""
	}
	// internal/plugins.Compile: a Go package and a name in it.
	if known {
		if i := strings.LastIndex(p, "."); i > strings.LastIndex(p, "/") && idx.dirs[p[:i]] {
			return ""
		}
	}
	return "names no file or folder of the repository"
}

// exists reports whether p names a file or folder: from the root, from the
// document's folder, or as the tail of a path anywhere in the repository,
// such as v1alpha1/plugin_types.go.
func (idx *repoIndex) exists(dir, p string) bool {
	if idx.paths[path.Clean(p)] || idx.paths[path.Join(dir, p)] {
		return true
	}
	for q := range idx.paths {
		if q == p || strings.HasSuffix(q, "/"+p) {
			return true
		}
	}
	return false
}

func hasExtension(p string) bool {
	return slices.Contains(pathExtensions, path.Ext(p)) || path.Base(p) == "Makefile" || path.Base(p) == "Dockerfile"
}

// fences follows a Markdown document's fenced code blocks, line by line.
type fences struct{ open string }

// in reports whether line is code: it opens, is inside or closes a fenced
// block (``` or ~~~), whose lines are not prose.
func (f *fences) in(line string) bool {
	trimmed := strings.TrimLeft(line, " \t")
	if f.open != "" {
		if strings.HasPrefix(trimmed, f.open) {
			f.open = ""
		}
		return true
	}
	if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
		f.open = trimmed[:3]
		return true
	}
	return false
}
