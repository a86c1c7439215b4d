package dashboard

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestLivePartIsThePagesOwn (OF-20): for the table, a plugin's page and the
// page of a plugin that is gone, the event the stream sends holds exactly
// the markup the first page holds in its data-live element, so the page
// reads the same before and after the script takes over.
func TestLivePartIsThePagesOwn(t *testing.T) {
	s := sampleSnapshot()
	s.canApprove = true
	s.core = sampleCore()
	for name, v := range map[string]view{"table": s.table(), "plugin": s.detail("b"), "gone": s.detail("c"), "removed": s.removedPage("b~0a1b2c3d")} {
		t.Run(name, func(t *testing.T) {
			page := renderPage(t, v)
			part := livePart(t, v)
			if !strings.Contains(page, " data-live>"+part+"</") {
				t.Errorf("the page's data-live element does not hold the live part.\npage:\n%s\nlive part:\n%s", page, part)
			}
			if n := strings.Count(page, " data-live>"); n != 1 {
				t.Errorf("%d data-live elements, want 1", n)
			}
		})
	}
}

// TestRenderedTable reads the table's live part as a browser would: rows
// sorted by name, each linking to its page relatively, its cells' words,
// tones and the digest's Copy button.
func TestRenderedTable(t *testing.T) {
	s := sampleSnapshot()
	doc := parse(t, livePart(t, s.table()))
	rows := findAll(doc, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-name") != "" })
	var names []string
	for _, r := range rows {
		names = append(names, attr(r, "data-name"))
	}
	if !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("rows %v, want a then b", names)
	}
	b := rows[1]
	if a := findAll(b, func(n *html.Node) bool { return n.Data == "a" }); len(a) != 1 || attr(a[0], "href") != "plugins/b" || text(a[0]) != "b" {
		t.Errorf("b's link: %v", a)
	}
	cells := findAll(b, func(n *html.Node) bool { return n.Data == "td" })
	if len(cells) != 6 {
		t.Fatalf("b has %d cells, want 6", len(cells))
	}
	for i, want := range map[int]struct{ class, text string }{
		0: {"tone-refused", "NoGrantnothing runs"},
		1: {"tone-signed", "◐ Signed, not verifieda trusted signer; not in the catalog (SignedByTrustedSigner)"},
		4: {"tone-pending", "⚠ Approval pending (2)capability connector, egress api.nbp.pl:443"},
		5: {"", "90s"},
	} {
		if got := attr(cells[i], "class"); got != want.class {
			t.Errorf("b's cell %d has class %q, want %q", i, got, want.class)
		}
		if got := text(cells[i]); got != want.text {
			t.Errorf("b's cell %d reads %q, want %q", i, got, want.text)
		}
	}
	copyButtons := findAll(cells[3], func(n *html.Node) bool { return n.Data == "button" })
	if len(copyButtons) != 1 || attr(copyButtons[0], "data-copy") != testutil.Image("b") || attr(cells[3], "title") != testutil.Image("b") {
		t.Errorf("b's digest cell does not offer the full reference %s", testutil.Image("b"))
	}
	empty := parse(t, livePart(t, snapshot{namespace: "openfief"}.table()))
	if got := text(empty); !strings.Contains(got, "No plugins in this namespace.") {
		t.Errorf("an empty table reads %q", got)
	}
}

// TestRenderedPluginPage reads a plugin's live part: its sections in order,
// the approve command with its Copy button, and the Approve button with the
// question and the versions the owner is shown.
func TestRenderedPluginPage(t *testing.T) {
	s := sampleSnapshot()
	s.canApprove = true
	doc := parse(t, livePart(t, s.detail("b")))
	var sections []string
	for _, n := range findAll(doc, func(n *html.Node) bool { return n.Data == "section" }) {
		sections = append(sections, attr(n, "aria-labelledby"))
	}
	want := []string{"h-summary", "h-pending", "h-manifest", "h-grant", "h-effective", "h-deployed", "h-history", "h-conditions"}
	if !slices.Equal(sections, want) {
		t.Errorf("sections %v, want %v", sections, want)
	}
	byID := func(id string) *html.Node {
		t.Helper()
		found := findAll(doc, func(n *html.Node) bool { return attr(n, "id") == id })
		if len(found) != 1 {
			t.Fatalf("%d elements with id %s, want 1", len(found), id)
		}
		return found[0]
	}
	if got := text(byID("approve-command")); got != "openfief plugin approve b" {
		t.Errorf("approve command %q", got)
	}
	if got := attr(byID("copy-command"), "data-copy"); got != "openfief plugin approve b" {
		t.Errorf("the command's Copy button copies %q", got)
	}
	approve := byID("approve")
	if q := attr(approve, "data-question"); !strings.HasPrefix(q, "Approve for plugin b: capability connector, egress api.nbp.pl:443?\n\nSignature: ◐ Signed, not verified") {
		t.Errorf("the Approve button asks %q", q)
	}
	if attr(approve, "data-plugin") != s.plugins[0].ResourceVersion || attr(approve, "data-grant") != "" {
		t.Errorf("the Approve button names versions %q and %q", attr(approve, "data-plugin"), attr(approve, "data-grant"))
	}
	s.canApprove = false
	if strings.Contains(livePart(t, s.detail("b")), `id="approve"`) {
		t.Error("a read-only dashboard's page has an Approve button")
	}
	if got := text(parse(t, livePart(t, s.detail("c")))); got != "There is no plugin of this name (any more)." {
		t.Errorf("the page of a plugin that is gone reads %q", got)
	}
}

// TestRenderedOutsideTextIsText (OF-17): with hostile text everywhere and
// markup in the config schema, the whole pages and their live parts hold
// only the elements the templates write (one script, the page's own), no
// event handler attribute, no control or bidi character in any text or
// attribute but the templates' and the preformatted values' line breaks,
// and the schema's markup as text.
func TestRenderedOutsideTextIsText(t *testing.T) {
	s := hostileSnapshot(t)
	// The elements of the live parts: what the templates write, nothing a
	// value could add.
	written := []string{"table", "caption", "thead", "tbody", "tr", "th", "td", "a", "span", "button", "ol", "li",
		"section", "h2", "p", "dl", "div", "dt", "dd", "pre", "code"}
	views := map[string]view{"table": s.table(), "plugin": s.detail("fx"), "gone": s.detail("nope" + hostileText), "removed": s.removedPage("fx~" + hostileText)}
	for name, v := range views {
		t.Run(name, func(t *testing.T) {
			page := renderPage(t, v)
			part := livePart(t, v)
			for what, markup := range map[string]string{"page": page, "live part": part} {
				doc := parse(t, markup)
				if what == "live part" {
					for _, n := range findAll(doc, func(n *html.Node) bool { return n.Type == html.ElementNode }) {
						if !slices.Contains(written, n.Data) && !slices.Contains([]string{"html", "head", "body"}, n.Data) {
							t.Errorf("%s: a <%s> element, which the templates never write", what, n.Data)
						}
					}
				}
				scripts := findAll(doc, func(n *html.Node) bool { return n.Data == "script" })
				if what == "page" && (len(scripts) != 1 || !strings.HasSuffix(attr(scripts[0], "src"), "assets/app.js")) {
					t.Errorf("%s: scripts %d, want only assets/app.js", what, len(scripts))
				}
				for _, n := range findAll(doc, func(*html.Node) bool { return true }) {
					checkRendered(t, what, n)
				}
			}
			if name == "plugin" {
				// The core's last error shows its markup as text.
				if !strings.Contains(text(parse(t, part)), hostileMarkup) {
					t.Errorf("the last error's markup %q is not shown as text", hostileMarkup)
				}
				// The schema is shown as indented JSON: the markup's quotes escaped.
				want := strings.ReplaceAll(hostileMarkup, `"`, `\"`)
				pres := findAll(parse(t, part), func(n *html.Node) bool { return n.Data == "pre" })
				if !slices.ContainsFunc(pres, func(n *html.Node) bool { return strings.Contains(text(n), want) }) {
					t.Errorf("the config schema's markup %q is not shown as text", want)
				}
			}
		})
	}
}

// checkRendered fails on an event handler attribute, and on text or an
// attribute value that holds an unsafe rune other than a line break.
func checkRendered(t *testing.T, what string, n *html.Node) {
	t.Helper()
	safe := func(s string) bool { return plugins.CheckText(strings.ReplaceAll(s, "\n", ""), 0) == nil }
	if n.Type == html.TextNode && !safe(n.Data) {
		t.Errorf("%s: text %q", what, n.Data)
	}
	for _, a := range n.Attr {
		if strings.HasPrefix(a.Key, "on") {
			t.Errorf("%s: <%s> has the event handler %s=%q", what, n.Data, a.Key, a.Val)
		}
		if !safe(a.Val) {
			t.Errorf("%s: <%s %s=%q>", what, n.Data, a.Key, a.Val)
		}
	}
}

// renderPage renders v's whole page as the server sends it.
func renderPage(t *testing.T, v view) string {
	t.Helper()
	rec := httptest.NewRecorder()
	render(rec, http.StatusOK, v)
	if rec.Code != http.StatusOK {
		t.Fatalf("rendering the page: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// livePart renders v's live part as the event stream sends it and decodes
// the event's data.
func livePart(t *testing.T, v view) string {
	t.Helper()
	b, err := liveUpdate(v)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(string(b), "\r\n") {
		t.Fatalf("the event's data spans lines: %q", b)
	}
	var u update
	if err := json.Unmarshal(b, &u); err != nil {
		t.Fatal(err)
	}
	return u.HTML
}

// parse reads markup as a browser's HTML parser does.
func parse(t *testing.T, markup string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(markup))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// findAll returns the nodes under n, n included, that match, in document
// order.
func findAll(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if match(d) {
			out = append(out, d)
		}
	}
	if match(n) {
		out = append([]*html.Node{n}, out...)
	}
	return out
}

// attr is the value of n's attribute key, "" when it has none.
func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// text is the text under n, without the templates' line breaks.
func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return strings.TrimSpace(strings.ReplaceAll(b.String(), "\n", ""))
}
