package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/arkadiuss/openfief/internal/core/store/deliveryrules"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// Kind says how a delivery reached the core (D-49); the delivery rules
// define it, since they check it.
type Kind = deliveryrules.Kind

// The two kinds of delivery.
const (
	KindSync = deliveryrules.KindSync
	KindFile = deliveryrules.KindFile
)

// ImportResult counts the rows an import newly stored; rows that were
// already there count nothing (D-18).
type ImportResult struct {
	Transactions, Postings, Balances, Prices, FxRates, IndexReadings, Problems int
	// Duplicate is true when the instance had already imported this batch
	// ID. Its rows are still stored when new (a retried Sync may carry more).
	Duplicate bool
}

// Rows is the number of rows the import stored, all tables together.
func (r ImportResult) Rows() int {
	return r.Transactions + r.Postings + r.Balances + r.Prices + r.FxRates + r.IndexReadings + r.Problems
}

// Import validates d with the SDK's delivery rules and the store's own,
// then stores it as one batch of instance (its source, D-49), all or
// nothing. Rows are keyed by instance and their natural key (a transaction
// by source_id, D-18), so a repeated delivery stores nothing twice; the
// first stored version of a row is kept. For KindSync the delivery's
// watermark is saved in the same transaction, so a failed import leaves the
// old one. A refused delivery returns a *ValidationError naming each field
// and rule, and stores nothing.
func (s *Store) Import(ctx context.Context, instance string, kind Kind, d *connectorv1.Delivery) (ImportResult, error) {
	if err := validate(instance, kind, d); err != nil {
		return ImportResult{}, err
	}
	im := &importer{s: s, instance: instance, batch: d.GetBatchId()}
	if s.writes != nil {
		// SQLite: committed with the writes queued with it (writegroup.go).
		var res ImportResult
		err := s.writeTx(ctx, func(gctx context.Context, tx *sql.Tx) error {
			im.tx = tx
			r, err := im.run(gctx, kind, d)
			if err != nil {
				return err
			}
			if err := s.checkFence(gctx, tx, instance); err != nil {
				return err
			}
			if err := s.step(&im.steps); err != nil {
				return fmt.Errorf("commit: %w", err)
			}
			res = r
			return nil
		})
		if err != nil {
			return ImportResult{}, fmt.Errorf("store: import %s: %w", instance, err)
		}
		return res, nil
	}
	begin := s.db.BeginTx
	if s.d.copy {
		// COPY needs the driver's connection under the transaction (bulk.go).
		c, err := s.db.Conn(ctx)
		if err != nil {
			return ImportResult{}, fmt.Errorf("store: import %s: begin: %w", instance, err)
		}
		defer func() { _ = c.Close() }()
		im.conn, begin = c, c.BeginTx
	}
	tx, err := begin(ctx, nil)
	if err != nil {
		return ImportResult{}, fmt.Errorf("store: import %s: begin: %w", instance, err)
	}
	defer func() { _ = tx.Rollback() }()
	im.tx = tx
	res, err := im.run(ctx, kind, d)
	if err != nil {
		return ImportResult{}, fmt.Errorf("store: import %s: %w", instance, err)
	}
	if err := s.checkFence(ctx, tx, instance); err != nil {
		return ImportResult{}, fmt.Errorf("store: import %s: %w", instance, err)
	}
	if err := s.step(&im.steps); err != nil {
		return ImportResult{}, fmt.Errorf("store: import %s: commit: %w", instance, err)
	}
	if err := tx.Commit(); err != nil {
		return ImportResult{}, fmt.Errorf("store: import %s: commit: %w", instance, err)
	}
	return res, nil
}

// importer stores one delivery inside one transaction.
type importer struct {
	s  *Store
	tx *sql.Tx
	// conn is the connection tx runs on where the dialect copies (bulk.go);
	// copying is set while entries are copied rather than inserted.
	conn     *sql.Conn
	copying  bool
	instance string
	batch    string
	steps    int
	// next is the next entry number of those reserve set aside.
	next int64
}

// reserve sets aside n entry numbers (OF-35) from the counter, before any
// entry is stored: in PostgreSQL the counter row stays locked until this
// transaction ends, so a concurrent import waits and takes larger numbers,
// and numbers become visible in the order they were handed out. An entry
// the store already had keeps its number; its reserved one is skipped.
func (im *importer) reserve(ctx context.Context, n int) error {
	if n == 0 {
		return nil
	}
	if err := im.s.step(&im.steps); err != nil {
		return err
	}
	var last int64
	if err := im.tx.QueryRowContext(ctx, im.s.d.bind(`UPDATE counters SET value = value + ? WHERE name = 'entries' RETURNING value`), n).Scan(&last); err != nil {
		return fmt.Errorf("entry numbers: %w", err)
	}
	im.next = last - int64(n) + 1
	return nil
}

// number hands out the next reserved entry number.
func (im *importer) number() int64 {
	n := im.next
	im.next++
	return n
}

func (im *importer) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if err := im.s.step(&im.steps); err != nil {
		return nil, err
	}
	return im.tx.ExecContext(ctx, im.s.d.bind(q), args...)
}

func (im *importer) run(ctx context.Context, kind Kind, d *connectorv1.Delivery) (ImportResult, error) {
	var res ImportResult
	if _, err := im.exec(ctx, `INSERT INTO instances (instance) VALUES (?) ON CONFLICT (instance) DO NOTHING`, im.instance); err != nil {
		return res, fmt.Errorf("instance: %w", err)
	}
	watermark := ""
	if kind == KindSync {
		watermark = d.GetWatermark()
	}
	r, err := im.exec(ctx, `INSERT INTO batches (instance, batch_id, kind, institution_id, institution_name, watermark)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (instance, batch_id) DO NOTHING`,
		im.instance, im.batch, kind.String(), d.GetInstitution().GetId(), d.GetInstitution().GetName(), watermark)
	if err != nil {
		return res, fmt.Errorf("batch: %w", err)
	}
	newBatch, err := r.RowsAffected()
	if err != nil {
		return res, fmt.Errorf("batch: %w", err)
	}
	res.Duplicate = newBatch == 0
	if err := im.reserve(ctx, len(d.GetTransactions())+len(d.GetBalanceAssertions())+len(d.GetPrices())+
		len(d.GetFxRates())+len(d.GetIndexReadings())); err != nil {
		return res, err
	}
	if im.conn != nil {
		err = im.copyEntries(ctx, d, &res)
	} else {
		err = im.entries(ctx, d, &res)
	}
	if err != nil {
		return res, err
	}
	counters := `UPDATE instances SET batches = batches + ?, transactions = transactions + ?, postings = postings + ?,
balances = balances + ?, prices = prices + ?, fx_rates = fx_rates + ?, index_readings = index_readings + ?, problems = problems + ?`
	args := []any{newBatch, res.Transactions, res.Postings, res.Balances, res.Prices, res.FxRates, res.IndexReadings, res.Problems}
	if kind == KindSync {
		counters += `, watermark = ?`
		args = append(args, watermark)
	}
	if _, err := im.exec(ctx, counters+` WHERE instance = ?`, append(args, im.instance)...); err != nil {
		return res, fmt.Errorf("counters: %w", err)
	}
	return res, nil
}

// entries stores d's entries, table by table, and counts the new rows in
// res.
func (im *importer) entries(ctx context.Context, d *connectorv1.Delivery, res *ImportResult) error {
	var err error
	storeTransactions := im.transactions
	if im.copying {
		storeTransactions = im.copyTransactions
	}
	if res.Transactions, res.Postings, err = storeTransactions(ctx, d.GetTransactions()); err != nil {
		return err
	}
	if res.Balances, err = im.balances(ctx, d.GetBalanceAssertions()); err != nil {
		return err
	}
	if res.Prices, err = im.prices(ctx, d.GetPrices()); err != nil {
		return err
	}
	if res.FxRates, err = im.fxRates(ctx, d.GetFxRates()); err != nil {
		return err
	}
	if res.IndexReadings, err = im.indexReadings(ctx, d.GetIndexReadings()); err != nil {
		return err
	}
	res.Problems, err = im.problems(ctx, d.GetProblems())
	return err
}

// table describes one multi-row INSERT ... ON CONFLICT DO NOTHING.
type table struct {
	name string
	cols []string
	key  string
}

// rowsPerStatement bounds the rows of one INSERT; the dialect's parameter
// limit may bound it lower.
const rowsPerStatement = 500

// insert stores rows (len(t.cols) values each, flattened) in multi-row
// statements and returns how many were new. Every full chunk reuses one
// prepared statement; the last, shorter one is prepared alone. With
// returning set, it reads that column of every new row into seen.
func (im *importer) insert(ctx context.Context, t table, vals []any, returning string, seen map[string]bool) (int, error) {
	if im.copying && returning == "" {
		return im.copyNewRows(ctx, t, vals)
	}
	ncols := len(t.cols)
	per := min(rowsPerStatement, im.s.d.maxParams/ncols)
	head := "INSERT INTO " + t.name + " (" + strings.Join(t.cols, ", ") + ") VALUES "
	tuple := "(" + strings.Repeat("?, ", ncols-1) + "?)"
	tail := " ON CONFLICT (" + t.key + ") DO NOTHING"
	if returning != "" {
		tail += " RETURNING " + returning
	}
	query := func(rows int) string {
		return im.s.d.bind(head + strings.Repeat(tuple+", ", rows-1) + tuple + tail)
	}
	var full *sql.Stmt
	defer func() {
		if full != nil {
			_ = full.Close()
		}
	}()
	stored := 0
	for start := 0; start < len(vals); start += per * ncols {
		end := min(start+per*ncols, len(vals))
		n := (end - start) / ncols
		var stmt *sql.Stmt
		var err error
		if n == per {
			if full == nil {
				if full, err = im.tx.PrepareContext(ctx, query(per)); err != nil {
					return 0, fmt.Errorf("%s: %w", t.name, err)
				}
			}
			stmt = full
		} else {
			if stmt, err = im.tx.PrepareContext(ctx, query(n)); err != nil {
				return 0, fmt.Errorf("%s: %w", t.name, err)
			}
		}
		added, err := im.insertChunk(ctx, stmt, vals[start:end], returning != "", seen)
		if stmt != full {
			_ = stmt.Close()
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", t.name, err)
		}
		stored += added
	}
	return stored, nil
}

func (im *importer) insertChunk(ctx context.Context, stmt *sql.Stmt, args []any, returning bool, seen map[string]bool) (int, error) {
	if err := im.s.step(&im.steps); err != nil {
		return 0, err
	}
	if !returning {
		r, err := stmt.ExecContext(ctx, args...)
		if err != nil {
			return 0, err
		}
		n, err := r.RowsAffected()
		return int(n), err
	}
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return 0, err
	}
	defer func() { _ = rows.Close() }() // read errors come from rows.Err
	n := 0
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return 0, err
		}
		seen[k] = true
		n++
	}
	return n, rows.Err()
}

var (
	transactionsTable = table{"transactions", []string{"instance", "source_id", "batch_id", "date", "value_date", "description", "payee", "seq"}, "instance, source_id"}
	postingsTable     = table{"postings", []string{"instance", "source_id", "idx", "account_id", "amount", "currency", "isin", "symbol", "exchange", "instrument_currency", "instrument_name", "quantity", "memo"}, "instance, source_id, idx"}
	balancesTable     = table{"balance_assertions", []string{"instance", "batch_id", "account_id", "date", "currency", "isin", "symbol", "exchange", "instrument_currency", "instrument_name", "amount", "quantity", "seq"}, "instance, account_id, date, currency, isin, symbol, exchange"}
	pricesTable       = table{"prices", []string{"instance", "batch_id", "date", "isin", "symbol", "exchange", "instrument_currency", "instrument_name", "currency", "price", "seq"}, "instance, date, isin, symbol, exchange, currency"}
	fxRatesTable      = table{"fx_rates", []string{"instance", "batch_id", "date", "base_currency", "quote_currency", "rate", "source_ref", "seq"}, "instance, date, base_currency, quote_currency"}
	indexTable        = table{"index_readings", []string{"instance", "batch_id", "index_id", "date", "value", "name", "seq"}, "instance, index_id, date"}
	problemsTable     = table{"problems", []string{"instance", "problem_key", "batch_id", "severity", "code", "message", "source_id", "location"}, "instance, problem_key"}
)

// transactions stores the transactions that are new, then the postings of
// those only: a transaction already stored keeps the postings it came with.
func (im *importer) transactions(ctx context.Context, ts []*connectorv1.Transaction) (int, int, error) {
	if len(ts) == 0 {
		return 0, 0, nil
	}
	vals := make([]any, 0, len(ts)*len(transactionsTable.cols))
	for _, t := range ts {
		vals = append(vals, im.instance, t.GetSourceId(), im.batch, t.GetDate(), t.GetValueDate(), t.GetDescription(), t.GetPayee(), im.number())
	}
	added := make(map[string]bool, len(ts))
	n, err := im.insert(ctx, transactionsTable, vals, "source_id", added)
	if err != nil || n == 0 {
		return n, 0, err
	}
	vals = vals[:0]
	for _, t := range ts {
		if !added[t.GetSourceId()] {
			continue
		}
		for j, p := range t.GetPostings() {
			in := p.GetInstrument()
			vals = append(vals, im.instance, t.GetSourceId(), j, p.GetAccountId(), p.GetAmount(), p.GetCurrency(),
				in.GetIsin(), in.GetSymbol(), in.GetExchange(), in.GetCurrency(), in.GetName(), p.GetQuantity(), p.GetMemo())
		}
	}
	np, err := im.insert(ctx, postingsTable, vals, "", nil)
	return n, np, err
}

func (im *importer) balances(ctx context.Context, bs []*connectorv1.BalanceAssertion) (int, error) {
	vals := make([]any, 0, len(bs)*len(balancesTable.cols))
	for _, b := range bs {
		in := b.GetInstrument()
		vals = append(vals, im.instance, im.batch, b.GetAccountId(), b.GetDate(), b.GetCurrency(),
			in.GetIsin(), in.GetSymbol(), in.GetExchange(), in.GetCurrency(), in.GetName(), b.GetAmount(), b.GetQuantity(), im.number())
	}
	return im.insert(ctx, balancesTable, vals, "", nil)
}

func (im *importer) prices(ctx context.Context, ps []*connectorv1.Price) (int, error) {
	vals := make([]any, 0, len(ps)*len(pricesTable.cols))
	for _, p := range ps {
		in := p.GetInstrument()
		vals = append(vals, im.instance, im.batch, p.GetDate(), in.GetIsin(), in.GetSymbol(), in.GetExchange(),
			in.GetCurrency(), in.GetName(), p.GetCurrency(), p.GetPrice(), im.number())
	}
	return im.insert(ctx, pricesTable, vals, "", nil)
}

func (im *importer) fxRates(ctx context.Context, rs []*connectorv1.FxRate) (int, error) {
	vals := make([]any, 0, len(rs)*len(fxRatesTable.cols))
	for _, r := range rs {
		vals = append(vals, im.instance, im.batch, r.GetDate(), r.GetBaseCurrency(), r.GetQuoteCurrency(), r.GetRate(), r.GetSourceRef(), im.number())
	}
	return im.insert(ctx, fxRatesTable, vals, "", nil)
}

func (im *importer) indexReadings(ctx context.Context, rs []*connectorv1.IndexReading) (int, error) {
	vals := make([]any, 0, len(rs)*len(indexTable.cols))
	for _, r := range rs {
		vals = append(vals, im.instance, im.batch, r.GetIndexId(), r.GetDate(), r.GetValue(), r.GetName(), im.number())
	}
	return im.insert(ctx, indexTable, vals, "", nil)
}

func (im *importer) problems(ctx context.Context, ps []*connectorv1.IngestProblem) (int, error) {
	vals := make([]any, 0, len(ps)*len(problemsTable.cols))
	for _, p := range ps {
		sev := severity(p.GetSeverity())
		vals = append(vals, im.instance, problemKey(sev, p), im.batch, sev, p.GetCode(), p.GetMessage(), p.GetSourceId(), p.GetLocation())
	}
	return im.insert(ctx, problemsTable, vals, "", nil)
}

// severity is the problem's severity as stored: "warning" or "error".
func severity(s connectorv1.Severity) string {
	if s == connectorv1.Severity_SEVERITY_WARNING {
		return "warning"
	}
	return "error"
}

// problemKey identifies a problem by its content, so the same problem
// reported by a later delivery is stored once. Validation refuses NUL, so
// the separator cannot occur inside a field.
func problemKey(sev string, p *connectorv1.IngestProblem) string {
	h := sha256.Sum256([]byte(strings.Join([]string{sev, p.GetCode(), p.GetSourceId(), p.GetLocation(), p.GetMessage()}, "\x00")))
	return hex.EncodeToString(h[:])
}
