package dashboard

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
)

// sampleCore is what the core answers for sampleSnapshot's plugins: a is a
// connector whose last sync failed, b a view, and two removed instances of
// b, listed out of order.
func sampleCore() coreState {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	last, next, removed := now.Add(-5*time.Minute), now.Add(55*time.Minute), now.Add(-3*time.Hour)
	return coreState{configured: true, answered: true, statuses: []ownerapi.InstanceStatus{
		{Plugin: "a", Instance: "a", Scheduled: true, LastSync: &last, LastError: "connector said: rate limited", NextSync: &next,
			RowsTotal: 7, Rows: ownerapi.RowCounts{Batches: 1, Transactions: 2, Postings: 4, FxRates: 1}},
		{Plugin: "b", Instance: "b~ffff0000", Removed: true, RemovedAt: &removed, RowsTotal: 3, Rows: ownerapi.RowCounts{Batches: 1, Prices: 3}},
		{Plugin: "b", Instance: "b", Scheduled: true, View: true, LastSync: &last, LastOK: true, NextSync: &next},
		{Plugin: "b", Instance: "b~0a1b2c3d", Removed: true, RemovedAt: &removed, RowsTotal: 12,
			Rows: ownerapi.RowCounts{Batches: 2, Transactions: 4, Postings: 8}},
	}}
}

// coreSectionOf returns the plugin page's core section, failing without one.
func coreSectionOf(t *testing.T, d Detail) Section {
	t.Helper()
	for _, s := range d.Sections {
		if s.ID == "core" {
			return s
		}
	}
	t.Fatalf("%s's page has no core section", d.Name)
	return Section{}
}

// itemsOf maps a section's labels to their values, joined.
func itemsOf(s Section) map[string]string {
	out := map[string]string{}
	for _, it := range s.Items {
		out[it.Label] = strings.Join(it.Values, " | ")
	}
	return out
}

// TestCoreSection: a plugin's page says what the core recorded of it as
// `plugin status` does: a connector's syncs, a view's exports, the last
// error and the rows; a plugin the core knows nothing of says so; a
// dashboard without the core shows no such section.
func TestCoreSection(t *testing.T) {
	s := sampleSnapshot()
	if slices.ContainsFunc(s.detail("a").Sections, func(sec Section) bool { return sec.ID == "core" }) {
		t.Error("a dashboard that does not read the core shows a core section")
	}
	s.core = sampleCore()
	got := itemsOf(coreSectionOf(t, s.detail("a")))
	want := map[string]string{
		"Called":      "yes, as a connector on a schedule",
		"Last sync":   "2026-11-30T11:55:00Z (5m ago), failed",
		"Last error":  "connector said: rate limited",
		"Next sync":   "2026-11-30T12:55:00Z",
		"Rows stored": "7 (batches 1, transactions 2, postings 4, balances 0, prices 0, FX rates 1, index readings 0, problems 0)",
	}
	if !mapsEqual(got, want) {
		t.Errorf("a connector's core section:\n got %v\nwant %v", got, want)
	}
	got = itemsOf(coreSectionOf(t, s.detail("b")))
	want = map[string]string{
		"Called":      "yes, as a view: sent what is new after each import and on a schedule",
		"Last export": "2026-11-30T11:55:00Z (5m ago), succeeded",
		"Next export": "2026-11-30T12:55:00Z",
		"Rows stored": "0 (batches 0, transactions 0, postings 0, balances 0, prices 0, FX rates 0, index readings 0, problems 0)",
	}
	if !mapsEqual(got, want) {
		t.Errorf("a view's core section:\n got %v\nwant %v", got, want)
	}
	s.core.statuses = s.core.statuses[1:]
	if sec := coreSectionOf(t, s.detail("a")); len(sec.Items) != 0 || !strings.HasPrefix(sec.Note, "openfief-core has recorded nothing for this plugin") {
		t.Errorf("a plugin the core does not know: %+v", sec)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// TestRenderedRemovedData reads the removed instances' data as a browser
// would: on the table page every key, sorted, with its plugin, rows, a link
// to its own page and the purge command with a Copy button (and no purge
// button); on a plugin's page (and a gone plugin's) the keys of its name;
// on a key's page the rows by table and the command.
func TestRenderedRemovedData(t *testing.T) {
	s := sampleSnapshot()
	s.core = sampleCore()
	s.purge = func(key string) string { return "openfief plugin purge-data " + key + " -n household" }
	doc := parse(t, livePart(t, s.table()))
	rows := findAll(doc, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-key") != "" })
	var keys []string
	for _, r := range rows {
		keys = append(keys, attr(r, "data-key"))
	}
	if !slices.Equal(keys, []string{"b~0a1b2c3d", "b~ffff0000"}) {
		t.Fatalf("removed rows %v, want b~0a1b2c3d then b~ffff0000", keys)
	}
	first := rows[0]
	if a := findAll(first, func(n *html.Node) bool { return n.Data == "a" }); len(a) != 1 || attr(a[0], "href") != "./removed/b~0a1b2c3d" {
		t.Errorf("the key's link: %v", a)
	}
	if got, want := text(first), "b~0a1b2c3db2026-11-30T09:00:00Z (3h ago)12openfief plugin purge-data b~0a1b2c3d -n household Copy"; got != want {
		t.Errorf("the first removed row reads\n%q, want\n%q", got, want)
	}
	buttons := findAll(doc, func(n *html.Node) bool { return n.Data == "button" })
	for _, b := range buttons {
		if !strings.Contains(attr(b, "class"), "copy") {
			t.Errorf("a button other than Copy on the table page: %v", b.Attr)
		}
	}
	if got := attr(findAll(first, func(n *html.Node) bool { return n.Data == "button" })[0], "data-copy"); got != "openfief plugin purge-data b~0a1b2c3d -n household" {
		t.Errorf("the Copy button copies %q", got)
	}

	for name, d := range map[string]Detail{"b": s.detail("b"), "a": s.detail("a"), "gone": s.detail("b-gone")} {
		part := parse(t, livePart(t, d))
		got := findAll(part, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-key") != "" })
		wantN := map[string]int{"b": 2, "a": 0, "gone": 0}[name]
		if len(got) != wantN {
			t.Errorf("%s's page lists %d removed keys, want %d", name, len(got), wantN)
		}
		if wantN > 0 && attr(findAll(got[0], func(n *html.Node) bool { return n.Data == "a" })[0], "href") != "../removed/b~0a1b2c3d" {
			t.Errorf("%s's page links the key wrongly", name)
		}
	}
	s.core.statuses = append(s.core.statuses, ownerapi.InstanceStatus{Plugin: "b-gone", Instance: "b-gone~01020304", Removed: true})
	if got := text(parse(t, livePart(t, s.detail("b-gone")))); !strings.Contains(got, "There is no plugin of this name (any more).") || !strings.Contains(got, "b-gone~01020304") {
		t.Errorf("the page of an uninstalled plugin reads %q, want its removed data", got)
	}

	page := parse(t, livePart(t, s.removedPage("b~0a1b2c3d")))
	got := map[string]string{}
	for _, it := range findAll(page, func(n *html.Node) bool { return n.Data == "div" && attr(n, "class") == "item" }) {
		dts := findAll(it, func(n *html.Node) bool { return n.Data == "dt" })
		dds := findAll(it, func(n *html.Node) bool { return n.Data == "dd" })
		got[text(dts[0])] = text(dds[0])
	}
	want := map[string]string{"Plugin": "b", "Removed": "2026-11-30T09:00:00Z (3h ago)", "Batches": "2", "Transactions": "4", "Postings": "8",
		"Balance assertions": "0", "Prices": "0", "FX rates": "0", "Index readings": "0", "Problems": "0", "Rows kept": "12"}
	if !mapsEqual(got, want) {
		t.Errorf("the key's page:\n got %v\nwant %v", got, want)
	}
	if cmd := findAll(page, func(n *html.Node) bool { return attr(n, "id") == "purge-command" }); len(cmd) != 1 || text(cmd[0]) != "openfief plugin purge-data b~0a1b2c3d -n household" {
		t.Errorf("the key's page does not show the purge command")
	}
	if p := s.removedPage("b~99999999"); !p.Gone || p.Entry != nil {
		t.Errorf("a key the core does not keep: %+v", p)
	}
}

// TestCoreDownLine: when the core does not answer, the table page, every
// plugin's page and a key's page say so in one escaped, bounded line, and
// show no data of the core's (none of it is current); before the first
// answer they say they wait.
func TestCoreDownLine(t *testing.T) {
	s := sampleSnapshot()
	s.core = coreState{configured: true}
	if note := coreSectionOf(t, s.detail("a")).Note; note != "Waiting for openfief-core's first answer." {
		t.Errorf("before the first answer: %q", note)
	}
	long := "no openfief-core answered (HTTP 503): \x1b[2J\u202e" + strings.Repeat("x", 5000)
	s.core = coreState{configured: true, answered: true, err: long}
	sec := coreSectionOf(t, s.detail("a"))
	if !sec.Alert || !strings.HasPrefix(sec.Note, "the core did not answer: no openfief-core answered (HTTP 503): \\x1b[2J\\u202e") || len(sec.Items) != 0 {
		t.Errorf("the core section when the core is down: %+v", sec)
	}
	if n := utf8.RuneCountInString(sec.Note); n > len(coreDownPrefix)+coreErrorMax+1 {
		t.Errorf("the line is %d characters long, want it bounded", n)
	}
	tbl := s.table()
	if tbl.Removed == nil || !tbl.Removed.Down || tbl.Removed.Note != sec.Note || len(tbl.Removed.Entries) != 0 {
		t.Errorf("the table's removed data when the core is down: %+v", tbl.Removed)
	}
	doc := parse(t, livePart(t, tbl))
	alerts := findAll(doc, func(n *html.Node) bool { return attr(n, "class") == "alert" })
	if len(alerts) != 1 || !strings.HasPrefix(text(alerts[0]), "the core did not answer: ") {
		t.Errorf("the table page's alert lines: %d", len(alerts))
	}
	if p := s.removedPage("b~0a1b2c3d"); !p.Down || p.Gone || p.Note != sec.Note {
		t.Errorf("a key's page when the core is down: %+v", p)
	}
}

// TestCorePollNotifiesOnChange: the poll wakes the pages when the core's
// answer changes (an answer, a different answer, an error) and not when it
// stays the same; each question is bounded in time.
func TestCorePollNotifiesOnChange(t *testing.T) {
	answers := []struct {
		statuses []ownerapi.InstanceStatus
		err      error
	}{
		{[]ownerapi.InstanceStatus{{Plugin: "a", Instance: "a"}}, nil},
		{[]ownerapi.InstanceStatus{{Plugin: "a", Instance: "a"}}, nil},
		{[]ownerapi.InstanceStatus{{Plugin: "a", Instance: "a", RowsTotal: 1}}, nil},
		{nil, errors.New("refused")},
		{nil, errors.New("refused")},
	}
	var i int
	var deadline time.Duration
	read := func(ctx context.Context) ([]ownerapi.InstanceStatus, error) {
		d, ok := ctx.Deadline()
		if !ok {
			t.Fatal("the core is asked without a deadline")
		}
		deadline = time.Until(d)
		a := answers[i]
		i++
		return a.statuses, a.err
	}
	var notified atomic.Int32
	p := newCorePoll(read, 0, func() { notified.Add(1) })
	if p.interval != DefaultCoreInterval || !p.current().configured || p.current().answered {
		t.Fatalf("a new poll: interval %v, state %+v", p.interval, p.current())
	}
	var got []int32
	for range answers {
		p.poll(t.Context())
		got = append(got, notified.Load())
	}
	if want := []int32{1, 1, 2, 3, 3}; !slices.Equal(got, want) {
		t.Errorf("notifications after each poll %v, want %v", got, want)
	}
	if deadline <= 0 || deadline > coreTimeout {
		t.Errorf("the question's deadline is %v away, want within %v", deadline, coreTimeout)
	}
	if st := p.current(); st.err != "refused" || st.statuses != nil {
		t.Errorf("after an error the state is %+v", st)
	}
}
