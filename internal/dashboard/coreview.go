package dashboard

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/display"
)

// What the pages show of openfief-core's owner API (OF-38): each plugin's
// syncs or exports and rows, and the data the core keeps of removed
// instances. Everything in the core's answer a plugin could have written
// (a last error above all) is shown through internal/display by shown(),
// and as text by the templates.

// coreDownPrefix starts the line a page shows when the core gave no answer.
const coreDownPrefix = "the core did not answer: "

// coreErrorMax bounds the core's error as the page repeats it.
const coreErrorMax = 512

// RemovedEntry is the data openfief-core keeps of one removed instance: its
// key, the Plugin name it had, when it was removed, its rows and the command
// that purges it. The dashboard deletes nothing itself.
type RemovedEntry struct {
	Key       string
	Plugin    string
	RemovedAt string
	Rows      int
	// Counts are the rows by table.
	Counts []Item
	// Command purges the data (openfief plugin purge-data KEY).
	Command string
}

// RemovedData is a page's "Removed data" part: a note (waiting for the
// core, the core's failure, or nothing kept) and the entries, sorted by key.
type RemovedData struct {
	// Root is the way from the page back to /TOKEN/, where the entries'
	// pages are under removed/.
	Root string
	Note string
	// Down is set when Note says the core did not answer.
	Down    bool
	Entries []RemovedEntry
}

// RemovedPage is the page of one removed instance's data, /removed/KEY.
type RemovedPage struct {
	Key string
	// Gone is set when the core answered and keeps nothing under Key.
	Gone  bool
	Note  string
	Down  bool
	Entry *RemovedEntry
}

func (RemovedPage) page() string { return "removed.html" }
func (RemovedPage) live() string { return "removed" }

// PageTitle is a removed instance's page title.
func (r RemovedPage) PageTitle() string { return "Removed data " + r.Key }

// Root is the way back to /TOKEN/ from /TOKEN/removed/KEY.
func (RemovedPage) Root() string { return "../" }

// coreNote says why the core's answer is not there: "" when it is.
func (c coreState) note() (string, bool) {
	switch {
	case !c.answered:
		return "Waiting for openfief-core's first answer.", false
	case c.err != "":
		return coreDownPrefix + display.Limit(c.err, coreErrorMax), true
	}
	return "", false
}

// removedEntries lists the removed instances (of the plugin name, or all
// when name is ""), sorted by key.
func (s snapshot) removedEntries(name string) []RemovedEntry {
	var out []RemovedEntry
	for _, st := range s.core.statuses {
		if !st.Removed || st.Instance == "" || (name != "" && st.Plugin != name) {
			continue
		}
		out = append(out, s.removedEntry(st))
	}
	slices.SortFunc(out, func(a, b RemovedEntry) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

func (s snapshot) removedEntry(st ownerapi.InstanceStatus) RemovedEntry {
	when := "at an unknown time"
	if st.RemovedAt != nil {
		when = st.RemovedAt.UTC().Format(time.RFC3339) + " (" + display.Age(s.now, *st.RemovedAt) + " ago)"
	}
	cmd := "openfief plugin purge-data " + st.Instance
	if s.purge != nil {
		cmd = s.purge(st.Instance)
	}
	return RemovedEntry{Key: st.Instance, Plugin: st.Plugin, RemovedAt: when, Rows: st.RowsTotal, Counts: rowItems(st.Rows), Command: cmd}
}

// removedData is the table page's "Removed data" part; nil when the
// dashboard does not read the core.
func (s snapshot) removedData() *RemovedData {
	if !s.core.configured {
		return nil
	}
	note, down := s.core.note()
	r := &RemovedData{Root: Table{}.Root(), Note: note, Down: down, Entries: []RemovedEntry{}}
	if note == "" {
		r.Entries = s.removedEntries("")
		if len(r.Entries) == 0 {
			r.Note = "openfief-core keeps no data of uninstalled plugins."
		}
	}
	return r
}

// removedOf is a plugin page's list of the data kept from earlier plugins
// of its name; nil when there is none (or no answer: the core section says
// why).
func (s snapshot) removedOf(name string) *RemovedData {
	if !s.core.configured || !s.core.answered || s.core.err != "" {
		return nil
	}
	entries := s.removedEntries(name)
	if len(entries) == 0 {
		return nil
	}
	return &RemovedData{Root: Detail{}.Root(), Note: "Kept from earlier plugins named " + name + ", uninstalled or replaced; the plugin now installed starts without it.", Entries: entries}
}

// removedPage builds the page of the removed instance key.
func (s snapshot) removedPage(key string) RemovedPage {
	p := RemovedPage{Key: key}
	if !s.core.configured {
		p.Note = "This dashboard does not read openfief-core."
		return p.shown()
	}
	if p.Note, p.Down = s.core.note(); p.Note != "" {
		return p.shown()
	}
	for _, e := range s.removedEntries("") {
		if e.Key == key {
			p.Entry = &e
			return p.shown()
		}
	}
	p.Gone = true
	p.Note = "openfief-core keeps no data under this key (any more)."
	return p.shown()
}

// coreSection is a plugin page's view of what the core recorded of it, as
// `openfief plugin status` prints it; false when the dashboard does not read
// the core.
func (s snapshot) coreSection(name string) (Section, bool) {
	if !s.core.configured {
		return Section{}, false
	}
	sec := Section{ID: "core", Title: "In openfief-core (syncs, exports and stored rows)"}
	if note, down := s.core.note(); note != "" {
		sec.Note, sec.Alert = note, down
		return sec, true
	}
	i := slices.IndexFunc(s.core.statuses, func(st ownerapi.InstanceStatus) bool {
		return !st.Removed && st.Plugin == name && (st.Instance == "" || st.Instance == name)
	})
	if i < 0 {
		sec.Note = "openfief-core has recorded nothing for this plugin: it has not called it, and nothing was imported for it."
		return sec, true
	}
	st := s.core.statuses[i]
	// A view's runs are exports, recorded where a connector's syncs are.
	what, called := "sync", "no (not a running connector or view)"
	switch {
	case st.Scheduled && st.View:
		what, called = "export", "yes, as a view: sent what is new after each import and on a schedule"
	case st.Scheduled:
		called = "yes, as a connector on a schedule"
	}
	last := "never"
	if st.LastSync != nil {
		outcome := "failed"
		if st.LastOK {
			outcome = "succeeded"
		}
		last = fmt.Sprintf("%s (%s ago), %s", st.LastSync.UTC().Format(time.RFC3339), display.Age(s.now, *st.LastSync), outcome)
	}
	next := "none planned"
	if st.NextSync != nil && st.Scheduled {
		next = st.NextSync.UTC().Format(time.RFC3339)
	}
	sec.Items = []Item{
		{Label: "Called", Values: []string{called}},
		{Label: "Last " + what, Values: []string{last}},
	}
	if st.LastError != "" {
		sec.Items = append(sec.Items, Item{Label: "Last error", Values: []string{st.LastError}})
	}
	sec.Items = append(sec.Items,
		Item{Label: "Next " + what, Values: []string{next}},
		Item{Label: "Rows stored", Values: []string{rowsText(st.RowsTotal, st.Rows)}},
	)
	return sec, true
}

// rowsText is a row count with its tables, as `plugin status` says it.
func rowsText(total int, r ownerapi.RowCounts) string {
	return fmt.Sprintf("%d (batches %d, transactions %d, postings %d, balances %d, prices %d, FX rates %d, index readings %d, problems %d)",
		total, r.Batches, r.Transactions, r.Postings, r.Balances, r.Prices, r.FxRates, r.IndexReadings, r.Problems)
}

// rowItems are the rows by table, one item each, in the purge preview's
// order.
func rowItems(r ownerapi.RowCounts) []Item {
	var out []Item
	for _, row := range []struct {
		table string
		n     int
	}{
		{"Batches", r.Batches}, {"Transactions", r.Transactions}, {"Postings", r.Postings},
		{"Balance assertions", r.Balances}, {"Prices", r.Prices}, {"FX rates", r.FxRates},
		{"Index readings", r.IndexReadings}, {"Problems", r.Problems},
	} {
		out = append(out, Item{Label: row.table, Values: []string{fmt.Sprint(row.n)}})
	}
	return out
}

// shown returns the removed data with every string through internal/display.
func (r *RemovedData) shown() *RemovedData {
	if r == nil {
		return nil
	}
	out := &RemovedData{Root: r.Root, Note: display.Message(r.Note), Down: r.Down, Entries: make([]RemovedEntry, len(r.Entries))}
	for i, e := range r.Entries {
		out.Entries[i] = e.shown()
	}
	return out
}

func (e RemovedEntry) shown() RemovedEntry {
	return RemovedEntry{Key: display.Text(e.Key), Plugin: display.Text(e.Plugin), RemovedAt: display.Text(e.RemovedAt),
		Rows: e.Rows, Counts: shownItems(e.Counts), Command: display.Text(e.Command)}
}

func (r RemovedPage) shown() RemovedPage {
	r.Key, r.Note = display.Text(r.Key), display.Message(r.Note)
	if r.Entry != nil {
		e := r.Entry.shown()
		r.Entry = &e
	}
	return r
}

// maxKey bounds a removed instance's key: a Plugin name (253), '~' and a
// tag (64), as the CLI's purge-data takes it.
const maxKey = 253 + 1 + 64

// validKey reports whether key can be a removed instance's key: lower-case
// letters, digits, '-', '.' and '~'. Anything else is no page. It is looser
// than the rule (store.ValidKey) on purpose: the dashboard may not link the
// core's store (depguard), and only keeps what cannot be a key out of its
// URLs; the page looks the key up among the removed instances the core
// lists, so a key that passes here but breaks the rule finds none and shows
// as gone.
func validKey(key string) bool {
	if key == "" || len(key) > maxKey {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '~') {
			return false
		}
	}
	return true
}
