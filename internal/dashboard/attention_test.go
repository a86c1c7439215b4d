package dashboard

import (
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// TestRenderedAttention reads the table page's "Needs your attention" list
// as a browser would: the items attention.Compute finds in what the
// watches and the core's poll hold, most urgent first, each linking to its
// plugin's page with the command to run and its Copy button; a core that
// does not answer is an item; nothing to do says so.
func TestRenderedAttention(t *testing.T) {
	s := sampleSnapshot()
	s.core = sampleCore()
	s.status = func(name string) string { return "openfief plugin status " + name + " --context home" }
	doc := parse(t, livePart(t, s.table()))
	items := findAll(doc, func(n *html.Node) bool { return n.Data == "li" && attr(n, "data-kind") != "" })
	var got []string
	for _, li := range items {
		got = append(got, attr(li, "data-kind")+" "+attr(li, "data-plugin"))
	}
	if want := []string{"SyncFailing a", "ApprovalPending b"}; !slices.Equal(got, want) {
		t.Fatalf("items %v, want %v", got, want)
	}
	for i, want := range []struct{ text, href, copy string }{
		{"SyncFailing a: the last sync of a failed 5m ago: connector said: rate limitedNext: openfief plugin status a --context home", "plugins/a", "openfief plugin status a --context home"},
		{"ApprovalPending b: plugin b waits for your approval (NoGrant); nothing of it runsNext: openfief plugin approve b", "plugins/b", "openfief plugin approve b"},
	} {
		li := items[i]
		if txt := text(li); txt != want.text+" Copy" {
			t.Errorf("item %d reads %q, want %q", i, txt, want.text)
		}
		links := findAll(li, func(n *html.Node) bool { return n.Type == html.ElementNode && n.Data == "a" })
		buttons := findAll(li, func(n *html.Node) bool { return n.Data == "button" })
		if len(links) != 1 || attr(links[0], "href") != want.href || len(buttons) != 1 || attr(buttons[0], "data-copy") != want.copy {
			t.Errorf("item %d: links %d (%q), copy %q", i, len(links), attr(links[0], "href"), attr(buttons[0], "data-copy"))
		}
	}
	if ids := findAll(doc, func(n *html.Node) bool { return strings.HasPrefix(attr(n, "id"), "copy-attention-") }); len(ids) != 2 || attr(ids[0], "id") == attr(ids[1], "id") {
		t.Errorf("the Copy buttons' ids are not one each: %d", len(ids))
	}

	s.core = coreState{configured: true, answered: true, err: "no openfief-core answered (HTTP 503)"}
	doc = parse(t, livePart(t, s.table()))
	if first := findAll(doc, func(n *html.Node) bool { return n.Data == "li" }); len(first) == 0 || attr(first[0], "data-kind") != "CoreUnreachable" {
		t.Errorf("a core that does not answer is not the first item: %s", livePart(t, s.table()))
	}

	empty := parse(t, livePart(t, snapshot{namespace: "openfief"}.table()))
	if got := text(empty); !strings.Contains(got, "Nothing needs your attention.") {
		t.Errorf("with nothing to do the page reads %q", got)
	}
}
