package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// RawImport writes d's rows under instance as plainly as the database
// allows, into the same schema through s's own connections, for the
// benchmarks that set the store's import beside it: no validation, no
// conflict handling, no counters, no entry-number reservation. On
// PostgreSQL each table is one COPY; on SQLite each row is one execution
// of a plain prepared INSERT. Both run in one transaction, committed. It
// returns the rows written.
func RawImport(ctx context.Context, s *Store, instance string, d *connectorv1.Delivery) (int, error) {
	c, err := s.db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = c.Close() }()
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, s.d.bind(`INSERT INTO instances (instance) VALUES (?)`), instance); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, s.d.bind(`INSERT INTO batches (instance, batch_id, kind, institution_id, institution_name, watermark) VALUES (?, ?, ?, ?, ?, ?)`),
		instance, d.GetBatchId(), KindSync.String(), d.GetInstitution().GetId(), d.GetInstitution().GetName(), d.GetWatermark()); err != nil {
		return 0, err
	}
	rows := 0
	for _, t := range rawTables(instance, d) {
		var n int
		if s.d.name == "postgres" {
			n, err = rawCopy(ctx, c, t)
		} else {
			n, err = rawSQLite(ctx, tx, t)
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", t.table.name, err)
		}
		rows += n
	}
	return rows, tx.Commit()
}

// rawTable is one table's rows, produced one at a time by next (false when
// done), as the store would produce them from the delivery.
type rawTable struct {
	table table
	next  func() ([]any, bool)
}

// rawTables yields d's rows table by table, streaming: the same columns and
// values the store writes (entry numbers counted from 1).
func rawTables(instance string, d *connectorv1.Delivery) []rawTable {
	batch := d.GetBatchId()
	seq := int64(0)
	number := func() int64 { seq++; return seq }
	each := func(t table, n int, row func(i int) []any) rawTable {
		i := 0
		return rawTable{t, func() ([]any, bool) {
			if i == n {
				return nil, false
			}
			i++
			return row(i - 1), true
		}}
	}
	ts := d.GetTransactions()
	tx, p := 0, 0
	postings := rawTable{postingsTable, func() ([]any, bool) {
		for tx < len(ts) && p == len(ts[tx].GetPostings()) {
			tx, p = tx+1, 0
		}
		if tx == len(ts) {
			return nil, false
		}
		t, ps := ts[tx], ts[tx].GetPostings()[p]
		in := ps.GetInstrument()
		p++
		return []any{instance, t.GetSourceId(), p - 1, ps.GetAccountId(), ps.GetAmount(), ps.GetCurrency(),
			in.GetIsin(), in.GetSymbol(), in.GetExchange(), in.GetCurrency(), in.GetName(), ps.GetQuantity(), ps.GetMemo()}, true
	}}
	return []rawTable{
		each(transactionsTable, len(ts), func(i int) []any {
			t := ts[i]
			return []any{instance, t.GetSourceId(), batch, t.GetDate(), t.GetValueDate(), t.GetDescription(), t.GetPayee(), number()}
		}),
		postings,
		each(balancesTable, len(d.GetBalanceAssertions()), func(i int) []any {
			b := d.GetBalanceAssertions()[i]
			in := b.GetInstrument()
			return []any{instance, batch, b.GetAccountId(), b.GetDate(), b.GetCurrency(),
				in.GetIsin(), in.GetSymbol(), in.GetExchange(), in.GetCurrency(), in.GetName(), b.GetAmount(), b.GetQuantity(), number()}
		}),
		each(pricesTable, len(d.GetPrices()), func(i int) []any {
			p := d.GetPrices()[i]
			in := p.GetInstrument()
			return []any{instance, batch, p.GetDate(), in.GetIsin(), in.GetSymbol(), in.GetExchange(),
				in.GetCurrency(), in.GetName(), p.GetCurrency(), p.GetPrice(), number()}
		}),
		each(fxRatesTable, len(d.GetFxRates()), func(i int) []any {
			r := d.GetFxRates()[i]
			return []any{instance, batch, r.GetDate(), r.GetBaseCurrency(), r.GetQuoteCurrency(), r.GetRate(), r.GetSourceRef(), number()}
		}),
		each(indexTable, len(d.GetIndexReadings()), func(i int) []any {
			r := d.GetIndexReadings()[i]
			return []any{instance, batch, r.GetIndexId(), r.GetDate(), r.GetValue(), r.GetName(), number()}
		}),
		each(problemsTable, len(d.GetProblems()), func(i int) []any {
			p := d.GetProblems()[i]
			sev := severity(p.GetSeverity())
			return []any{instance, problemKey(sev, p), batch, sev, p.GetCode(), p.GetMessage(), p.GetSourceId(), p.GetLocation()}
		}),
	}
}

// rawCopy is one COPY of t's rows on the transaction's connection.
// The transaction is database/sql's on the same connection.
func rawCopy(ctx context.Context, c *sql.Conn, t rawTable) (int, error) {
	var n int64
	err := c.Raw(func(dc any) error {
		src := pgx.CopyFromFunc(func() ([]any, error) {
			row, _ := t.next()
			return row, nil
		})
		var err error
		n, err = dc.(*stdlib.Conn).Conn().CopyFrom(ctx, pgx.Identifier{t.table.name}, t.table.cols, src)
		return err
	})
	return int(n), err
}

// rawSQLite executes one prepared single-row INSERT per row of t.
func rawSQLite(ctx context.Context, tx *sql.Tx, t rawTable) (int, error) {
	q := "INSERT INTO " + t.table.name + " (" + strings.Join(t.table.cols, ", ") + ") VALUES (" +
		strings.Repeat("?, ", len(t.table.cols)-1) + "?)"
	stmt, err := tx.PrepareContext(ctx, q)
	if err != nil {
		return 0, err
	}
	defer func() { _ = stmt.Close() }()
	n := 0
	for row, ok := t.next(); ok; row, ok = t.next() {
		if _, err := stmt.ExecContext(ctx, row...); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}
