package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"

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
}

// MaxPageEntries bounds the entries of one page.
const MaxPageEntries = 5000

// ReadPage reads the next entries of the kinds given for view (a view
// instance's name), after the view's place for each kind: at most limit
// entries (1 to MaxPageEntries), the oldest first. It records nothing: the
// view's place moves only with AdvanceView.
func (s *Store) ReadPage(ctx context.Context, view string, kinds []EntryKind, limit int) (Page, error) {
	if limit < 1 || limit > MaxPageEntries {
		return Page{}, fmt.Errorf("store: read page for %s: limit %d is not between 1 and %d", view, limit, MaxPageEntries)
	}
	places, err := s.ViewPlaces(ctx, view)
	if err != nil {
		return Page{}, err
	}
	var all []Entry
	more := false
	for _, k := range EntryKinds {
		if !slices.Contains(kinds, k) {
			continue
		}
		got, err := s.readKind(ctx, k, places[k], limit+1)
		if err != nil {
			return Page{}, fmt.Errorf("store: read page for %s: %s: %w", view, k, err)
		}
		if len(got) > limit {
			more = true
			got = got[:limit]
		}
		all = append(all, got...)
	}
	slices.SortFunc(all, func(a, b Entry) int { return cmp.Compare(a.Seq, b.Seq) })
	if len(all) > limit {
		more = true
		all = all[:limit]
	}
	p := Page{Entries: all, Places: map[EntryKind]int64{}, More: more}
	for _, e := range all {
		p.Places[e.Kind] = max(p.Places[e.Kind], e.Seq)
	}
	if err := s.withPostings(ctx, p.Entries); err != nil {
		return Page{}, fmt.Errorf("store: read page for %s: %w", view, err)
	}
	return p, nil
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
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: advance %s: %w", view, err)
	}
	return nil
}

// ResetView forgets view's places: its next page starts from the oldest
// entry of every kind.
func (s *Store) ResetView(ctx context.Context, view string) error {
	if _, err := s.db.ExecContext(ctx, s.d.bind(`DELETE FROM view_places WHERE instance = ?`), view); err != nil {
		return fmt.Errorf("store: reset %s: %w", view, err)
	}
	return nil
}

// kindQueries select the entries of each kind after a number, with the
// institution of the batch that brought each, oldest first.
var kindQueries = map[EntryKind]string{
	KindFxRates: `SELECT r.seq, r.instance, b.institution_id, b.institution_name,
r.date, r.base_currency, r.quote_currency, r.rate, r.source_ref
FROM fx_rates r JOIN batches b ON b.instance = r.instance AND b.batch_id = r.batch_id
WHERE r.seq > ? ORDER BY r.seq LIMIT ?`,
	KindPrices: `SELECT r.seq, r.instance, b.institution_id, b.institution_name,
r.date, r.isin, r.symbol, r.exchange, r.instrument_currency, r.instrument_name, r.currency, r.price
FROM prices r JOIN batches b ON b.instance = r.instance AND b.batch_id = r.batch_id
WHERE r.seq > ? ORDER BY r.seq LIMIT ?`,
	KindIndexReadings: `SELECT r.seq, r.instance, b.institution_id, b.institution_name,
r.index_id, r.date, r.value, r.name
FROM index_readings r JOIN batches b ON b.instance = r.instance AND b.batch_id = r.batch_id
WHERE r.seq > ? ORDER BY r.seq LIMIT ?`,
	KindTransactions: `SELECT r.seq, r.instance, b.institution_id, b.institution_name,
r.source_id, r.date, r.value_date, r.description, r.payee
FROM transactions r JOIN batches b ON b.instance = r.instance AND b.batch_id = r.batch_id
WHERE r.seq > ? ORDER BY r.seq LIMIT ?`,
	KindBalanceAssertions: `SELECT r.seq, r.instance, b.institution_id, b.institution_name,
r.account_id, r.date, r.currency, r.isin, r.symbol, r.exchange, r.instrument_currency, r.instrument_name, r.amount, r.quantity
FROM balance_assertions r JOIN batches b ON b.instance = r.instance AND b.batch_id = r.batch_id
WHERE r.seq > ? ORDER BY r.seq LIMIT ?`,
}

// readKind reads at most limit entries of kind numbered after after.
func (s *Store) readKind(ctx context.Context, kind EntryKind, after int64, limit int) ([]Entry, error) {
	rows, err := s.db.QueryContext(ctx, s.d.bind(kindQueries[kind]), after, limit)
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
	byKey := map[[2]string]*connectorv1.Transaction{}
	lo, hi := int64(-1), int64(-1)
	for _, e := range entries {
		if e.Transaction == nil {
			continue
		}
		byKey[[2]string{e.Source, e.Transaction.GetSourceId()}] = e.Transaction
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
		if in.Isin != "" || in.Symbol != "" {
			p.Instrument = in
		}
		// The span may hold transactions the page cut off: skip theirs.
		if t := byKey[[2]string{instance, sourceID}]; t != nil {
			t.Postings = append(t.Postings, p)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postings: %w", err)
	}
	return nil
}
