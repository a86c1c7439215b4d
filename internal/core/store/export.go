package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// EntryKind is a kind of entry of the record that a view may be sent
// (OF-35); it is also the name of the table that holds it.
type EntryKind string

// The kinds of entry, in the order ReadPage reads them.
const (
	KindFxRates           EntryKind = "fx_rates"
	KindPrices            EntryKind = "prices"
	KindIndexReadings     EntryKind = "index_readings"
	KindTransactions      EntryKind = "transactions"
	KindBalanceAssertions EntryKind = "balance_assertions"
)

// EntryKinds are every kind of entry, in ReadPage's order.
var EntryKinds = []EntryKind{KindFxRates, KindPrices, KindIndexReadings, KindTransactions, KindBalanceAssertions}

// Entry is one stored entry with its number, the connector instance that
// delivered it and the institution of that delivery. Exactly one of the
// entry fields is set, the one Kind names.
type Entry struct {
	Seq         int64
	Kind        EntryKind
	Source      string
	Institution *connectorv1.Institution
	// Size is what the entry counts for in a page's bytes (PageBounds),
	// measured as read: RowCost and the bytes of its text (its instance's
	// and institution's included), for a transaction with RowCost and the
	// text of each of its postings.
	Size int64

	FxRate           *connectorv1.FxRate
	Price            *connectorv1.Price
	IndexReading     *connectorv1.IndexReading
	Transaction      *connectorv1.Transaction
	BalanceAssertion *connectorv1.BalanceAssertion
}

// Page is a view's next entries.
type Page struct {
	// Entries are ordered by number.
	Entries []Entry
	// Places is, for each kind with entries in the page, the number of its
	// last one: AdvanceView records them once the view has kept the page.
	Places map[EntryKind]int64
	// More says the store held further entries of the kinds asked for.
	More bool
	// Bytes is the sum of the entries' sizes as the database computed
	// them before they were read: what PageBounds.Bytes bounds. It equals
	// the sum of their Size, unless the entries changed between the two
	// reads (a purge removed some; a removal lengthened their source's
	// name by a few bytes, well within the RowCost of each).
	Bytes int64
}

// MaxPageEntries bounds the entries of one page.
const MaxPageEntries = 5000

// DefaultPageBytes is the bytes of a page when PageBounds does not say: the
// core's largest request to a view (8 MiB).
const DefaultPageBytes = 8 << 20

// RowCost is what a row costs beyond its text, in an entry's size: the Go
// structs it is read into and the tags of its encoding. It makes an
// entry's size bound its memory and its encoded form, however short its
// strings.
const RowCost = 256

// PageBounds bound one page before anything of it is read.
type PageBounds struct {
	// Entries is the most entries of the page (1 to MaxPageEntries).
	Entries int
	// Bytes is the most bytes of the page, by the entries' sizes
	// (Entry.Size); 0 means DefaultPageBytes. The entries are taken in
	// order while they fit. An entry larger than Bytes on its own is a page
	// of its own, so a page holds at most Bytes, or one entry.
	Bytes int64
}

// ReadPage reads the next entries of the kinds given for view (a view
// instance's name), after the view's place for each kind, the oldest first,
// within bounds. The bounds hold before the entries are read: the store
// first reads the numbers and sizes of the candidates (the size computed by
// the database), picks those that fit, and then reads those alone. It
// records nothing: the view's place moves only with AdvanceView.
func (s *Store) ReadPage(ctx context.Context, view string, kinds []EntryKind, bounds PageBounds) (Page, error) {
	limit := bounds.Entries
	if limit < 1 || limit > MaxPageEntries {
		return Page{}, fmt.Errorf("store: read page for %s: limit %d is not between 1 and %d", view, limit, MaxPageEntries)
	}
	budget := bounds.Bytes
	if budget == 0 {
		budget = DefaultPageBytes
	}
	if budget < 0 {
		return Page{}, fmt.Errorf("store: read page for %s: a byte bound of %d", view, budget)
	}
	places, err := s.ViewPlaces(ctx, view)
	if err != nil {
		return Page{}, err
	}
	// The candidates: numbers and sizes only, of each kind at most limit+1
	// and no more than fit the budget and one beyond.
	var all []candidate
	for _, k := range EntryKinds {
		if !slices.Contains(kinds, k) {
			continue
		}
		got, err := s.candidates(ctx, k, places[k], limit+1, budget)
		if err != nil {
			return Page{}, fmt.Errorf("store: read page for %s: %s: %w", view, k, err)
		}
		all = append(all, got...)
	}
	slices.SortFunc(all, func(a, b candidate) int { return cmp.Compare(a.seq, b.seq) })
	// Those that fit, in order: the first always (alone if it is larger
	// than the budget).
	var total int64
	taken := 0
	for _, c := range all {
		if taken == limit || (taken > 0 && total+c.size > budget) {
			break
		}
		total += c.size
		taken++
	}
	p := Page{Places: map[EntryKind]int64{}, More: taken < len(all)}
	count := map[EntryKind]int{}
	for _, c := range all[:taken] {
		p.Places[c.kind] = max(p.Places[c.kind], c.seq)
		count[c.kind]++
	}
	// The entries taken of a kind are its first ones: read exactly those.
	for _, k := range EntryKinds {
		if count[k] == 0 {
			continue
		}
		got, err := s.readKind(ctx, k, places[k], p.Places[k], count[k])
		if err != nil {
			return Page{}, fmt.Errorf("store: read page for %s: %s: %w", view, k, err)
		}
		p.Entries = append(p.Entries, got...)
	}
	slices.SortFunc(p.Entries, func(a, b Entry) int { return cmp.Compare(a.Seq, b.Seq) })
	if err := s.withPostings(ctx, p.Entries); err != nil {
		return Page{}, fmt.Errorf("store: read page for %s: %w", view, err)
	}
	p.Bytes = total
	return p, nil
}

// candidate is an entry's number and size, before the entry is read.
type candidate struct {
	seq, size int64
	kind      EntryKind
}

// candidates reads the numbers and sizes of the entries of kind numbered
// after after, oldest first: at most limit, and none past the first whose
// predecessors of its kind exceed budget (that one says there is more).
// They are read in growing chunks, so that the database computes the
// sizes of no more than a chunk beyond those.
func (s *Store) candidates(ctx context.Context, kind EntryKind, after int64, limit int, budget int64) ([]candidate, error) {
	var out []candidate
	var sum int64
	for chunk := 2; ; chunk *= 2 {
		n := min(chunk, limit-len(out))
		got, err := s.sizes(ctx, kind, after, n)
		if err != nil {
			return nil, err
		}
		for _, c := range got {
			out = append(out, c)
			if sum > budget {
				return out, nil
			}
			sum += c.size
		}
		if len(got) < n || len(out) == limit {
			return out, nil
		}
		after = out[len(out)-1].seq
	}
}

// sizes reads the numbers and sizes of at most limit entries of kind
// numbered after after, oldest first.
func (s *Store) sizes(ctx context.Context, kind EntryKind, after int64, limit int) ([]candidate, error) {
	rows, err := s.db.QueryContext(ctx, s.d.bind(sizeQueries[kind]), after, limit)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }() // read errors come from rows.Err
	var out []candidate
	for rows.Next() {
		c := candidate{kind: kind}
		if err := rows.Scan(&c.seq, &c.size); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// ViewPlaces is view's place for each kind of entry: the number of the last
// entry it kept, or 0 (absent) for a kind it has none of.
func (s *Store) ViewPlaces(ctx context.Context, view string) (map[EntryKind]int64, error) {
	rows, err := s.db.QueryContext(ctx, s.d.bind(`SELECT kind, seq FROM view_places WHERE instance = ?`), view)
	if err != nil {
		return nil, fmt.Errorf("store: places of %s: %w", view, err)
	}
	defer func() { _ = rows.Close() }() // read errors come from rows.Err
	out := map[EntryKind]int64{}
	for rows.Next() {
		var k string
		var seq int64
		if err := rows.Scan(&k, &seq); err != nil {
			return nil, fmt.Errorf("store: places of %s: %w", view, err)
		}
		out[EntryKind(k)] = seq
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: places of %s: %w", view, err)
	}
	return out, nil
}

// AdvanceView moves view's place for each kind in places to the number
// given, never back: a place already further stays where it is, so a late
// or repeated acknowledgement cannot make a view receive entries again.
func (s *Store) AdvanceView(ctx context.Context, view string, places map[EntryKind]int64) error {
	done, err := s.writeTurn(ctx)
	if err != nil {
		return fmt.Errorf("store: advance %s: %w", view, err)
	}
	defer done()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: advance %s: %w", view, err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, k := range EntryKinds {
		seq, ok := places[k]
		if !ok {
			continue
		}
		if _, err := tx.ExecContext(ctx, s.d.bind(`INSERT INTO view_places (instance, kind, seq) VALUES (?, ?, ?)
ON CONFLICT (instance, kind) DO UPDATE SET seq = excluded.seq WHERE view_places.seq < excluded.seq`), view, string(k), seq); err != nil {
			return fmt.Errorf("store: advance %s: %s: %w", view, k, err)
		}
	}
	if err := s.checkFence(ctx, tx, view); err != nil {
		return fmt.Errorf("store: advance %s: %w", view, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: advance %s: %w", view, err)
	}
	return nil
}

// ResetView forgets view's places: its next page starts from the oldest
// entry of every kind.
func (s *Store) ResetView(ctx context.Context, view string) error {
	if err := s.fenced(ctx, view, func(e execer) error {
		_, err := e.ExecContext(ctx, s.d.bind(`DELETE FROM view_places WHERE instance = ?`), view)
		return err
	}); err != nil {
		return fmt.Errorf("store: reset %s: %w", view, err)
	}
	return nil
}

// entryTables are, for each kind, its table and the text columns of an
// entry, in the order readKind scans them after the number, the instance
// and the institution.
var entryTables = map[EntryKind][]string{
	KindFxRates:           {"date", "base_currency", "quote_currency", "rate", "source_ref"},
	KindPrices:            {"date", "isin", "symbol", "exchange", "instrument_currency", "instrument_name", "currency", "price"},
	KindIndexReadings:     {"index_id", "date", "value", "name"},
	KindTransactions:      {"source_id", "date", "value_date", "description", "payee"},
	KindBalanceAssertions: {"account_id", "date", "currency", "isin", "symbol", "exchange", "instrument_currency", "instrument_name", "amount", "quantity"},
}

// postingColumns are the text columns of a posting, in withPostings' order.
var postingColumns = []string{"account_id", "amount", "currency", "isin", "symbol", "exchange", "instrument_currency", "instrument_name", "quantity", "memo"}

// kindQueries select the entries of each kind numbered in a range, with
// the institution of the batch that brought each, oldest first; sizeQueries
// select only the number and size of the entries after a number. An
// entry's size is RowCost and the bytes of its text, its instance's and
// institution's included, plus, for a transaction, RowCost and the bytes
// of each posting's text: what entrySize computes of the entry read.
var kindQueries, sizeQueries = entryQueries()

func entryQueries() (map[EntryKind]string, map[EntryKind]string) {
	octets := func(alias string, cols []string) string {
		var b strings.Builder
		for _, c := range cols {
			fmt.Fprintf(&b, " + octet_length(%s.%s)", alias, c)
		}
		return b.String()
	}
	from := func(k EntryKind) string {
		return fmt.Sprintf("FROM %s r JOIN batches b ON b.instance = r.instance AND b.batch_id = r.batch_id", k)
	}
	reads, sizes := map[EntryKind]string{}, map[EntryKind]string{}
	for k, cols := range entryTables {
		reads[k] = fmt.Sprintf("SELECT r.seq, r.instance, b.institution_id, b.institution_name, r.%s\n%s\nWHERE r.seq > ? AND r.seq <= ? ORDER BY r.seq LIMIT ?",
			strings.Join(cols, ", r."), from(k))
		size := fmt.Sprintf("%d + octet_length(r.instance) + octet_length(b.institution_id) + octet_length(b.institution_name)%s", RowCost, octets("r", cols))
		if k == KindTransactions {
			size += fmt.Sprintf("\n + (SELECT COALESCE(SUM(%d%s), 0) FROM postings p WHERE p.instance = r.instance AND p.source_id = r.source_id)",
				RowCost, octets("p", postingColumns))
		}
		sizes[k] = fmt.Sprintf("SELECT r.seq, %s\n%s\nWHERE r.seq > ? ORDER BY r.seq LIMIT ?", size, from(k))
	}
	return reads, sizes
}

// entrySize is the size of an entry read, as sizeQueries compute it.
func entrySize(e Entry) int64 {
	n := RowCost + len(e.Source) + len(e.Institution.GetId()) + len(e.Institution.GetName())
	text := func(ss ...string) {
		for _, s := range ss {
			n += len(s)
		}
	}
	in := func(i *connectorv1.Instrument) {
		text(i.GetIsin(), i.GetSymbol(), i.GetExchange(), i.GetCurrency(), i.GetName())
	}
	switch {
	case e.FxRate != nil:
		r := e.FxRate
		text(r.GetDate(), r.GetBaseCurrency(), r.GetQuoteCurrency(), r.GetRate(), r.GetSourceRef())
	case e.Price != nil:
		r := e.Price
		text(r.GetDate(), r.GetCurrency(), r.GetPrice())
		in(r.GetInstrument())
	case e.IndexReading != nil:
		r := e.IndexReading
		text(r.GetIndexId(), r.GetDate(), r.GetValue(), r.GetName())
	case e.Transaction != nil:
		r := e.Transaction
		text(r.GetSourceId(), r.GetDate(), r.GetValueDate(), r.GetDescription(), r.GetPayee())
		for _, p := range r.GetPostings() {
			n += postingSize(p, p.GetInstrument())
		}
	case e.BalanceAssertion != nil:
		r := e.BalanceAssertion
		text(r.GetAccountId(), r.GetDate(), r.GetCurrency(), r.GetAmount(), r.GetQuantity())
		in(r.GetInstrument())
	}
	return int64(n)
}

// postingSize is a posting's part of its transaction's size, with the
// instrument's columns as read (i).
func postingSize(p *connectorv1.Posting, i *connectorv1.Instrument) int {
	return RowCost + len(p.GetAccountId()) + len(p.GetAmount()) + len(p.GetCurrency()) + len(i.GetIsin()) + len(i.GetSymbol()) +
		len(i.GetExchange()) + len(i.GetCurrency()) + len(i.GetName()) + len(p.GetQuantity()) + len(p.GetMemo())
}

// readKind reads at most limit entries of kind numbered after after, up
// to last.
func (s *Store) readKind(ctx context.Context, kind EntryKind, after, last int64, limit int) ([]Entry, error) {
	rows, err := s.db.QueryContext(ctx, s.d.bind(kindQueries[kind]), after, last, limit)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }() // read errors come from rows.Err
	var out []Entry
	for rows.Next() {
		e := Entry{Kind: kind, Institution: &connectorv1.Institution{}}
		dest := []any{&e.Seq, &e.Source, &e.Institution.Id, &e.Institution.Name}
		in := &connectorv1.Instrument{}
		switch kind {
		case KindFxRates:
			e.FxRate = &connectorv1.FxRate{}
			dest = append(dest, &e.FxRate.Date, &e.FxRate.BaseCurrency, &e.FxRate.QuoteCurrency, &e.FxRate.Rate, &e.FxRate.SourceRef)
		case KindPrices:
			e.Price = &connectorv1.Price{Instrument: in}
			dest = append(dest, &e.Price.Date, &in.Isin, &in.Symbol, &in.Exchange, &in.Currency, &in.Name, &e.Price.Currency, &e.Price.Price)
		case KindIndexReadings:
			e.IndexReading = &connectorv1.IndexReading{}
			dest = append(dest, &e.IndexReading.IndexId, &e.IndexReading.Date, &e.IndexReading.Value, &e.IndexReading.Name)
		case KindTransactions:
			e.Transaction = &connectorv1.Transaction{}
			dest = append(dest, &e.Transaction.SourceId, &e.Transaction.Date, &e.Transaction.ValueDate, &e.Transaction.Description, &e.Transaction.Payee)
		case KindBalanceAssertions:
			e.BalanceAssertion = &connectorv1.BalanceAssertion{Instrument: in}
			b := e.BalanceAssertion
			dest = append(dest, &b.AccountId, &b.Date, &b.Currency, &in.Isin, &in.Symbol, &in.Exchange, &in.Currency, &in.Name, &b.Amount, &b.Quantity)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		// Sized as read, before an empty instrument is dropped.
		e.Size = entrySize(e)
		s.loaded.Add(e.Size)
		// An entry without an instrument was delivered without one.
		if in.Isin == "" && in.Symbol == "" {
			switch {
			case e.Price != nil:
				e.Price.Instrument = nil
			case e.BalanceAssertion != nil:
				e.BalanceAssertion.Instrument = nil
			}
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// withPostings reads the postings of the transactions among entries, in
// their order, with one query over the numbers the transactions span.
func (s *Store) withPostings(ctx context.Context, entries []Entry) error {
	byKey := map[[2]string]*Entry{}
	lo, hi := int64(-1), int64(-1)
	for i := range entries {
		e := &entries[i]
		if e.Transaction == nil {
			continue
		}
		byKey[[2]string{e.Source, e.Transaction.GetSourceId()}] = e
		if lo < 0 || e.Seq < lo {
			lo = e.Seq
		}
		hi = max(hi, e.Seq)
	}
	if len(byKey) == 0 {
		return nil
	}
	rows, err := s.db.QueryContext(ctx, s.d.bind(`SELECT p.instance, p.source_id, p.account_id, p.amount, p.currency, p.isin, p.symbol,
p.exchange, p.instrument_currency, p.instrument_name, p.quantity, p.memo
FROM postings p JOIN transactions t ON t.instance = p.instance AND t.source_id = p.source_id
WHERE t.seq >= ? AND t.seq <= ? ORDER BY t.seq, p.idx`), lo, hi)
	if err != nil {
		return fmt.Errorf("postings: %w", err)
	}
	defer func() { _ = rows.Close() }() // read errors come from rows.Err
	for rows.Next() {
		var instance, sourceID string
		p := &connectorv1.Posting{}
		in := &connectorv1.Instrument{}
		if err := rows.Scan(&instance, &sourceID, &p.AccountId, &p.Amount, &p.Currency, &in.Isin, &in.Symbol, &in.Exchange,
			&in.Currency, &in.Name, &p.Quantity, &p.Memo); err != nil {
			return fmt.Errorf("postings: %w", err)
		}
		size := postingSize(p, in)
		if in.Isin != "" || in.Symbol != "" {
			p.Instrument = in
		}
		s.loaded.Add(int64(size))
		// The span may hold transactions the page cut off: skip theirs.
		if e := byKey[[2]string{instance, sourceID}]; e != nil {
			e.Transaction.Postings = append(e.Transaction.Postings, p)
			e.Size += int64(size)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postings: %w", err)
	}
	return nil
}
