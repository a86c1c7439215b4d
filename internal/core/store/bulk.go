package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// On PostgreSQL a delivery's transactions and their postings, nearly all of
// its rows, are written with COPY straight into their tables instead of
// multi-row INSERTs: measured side by side (BenchmarkImportVsRaw), the
// INSERTs reached 0.37-0.55 of a raw COPY of the same rows, and most of
// that gap is the statements themselves (thousands of parameters bound,
// sent and parsed per chunk, each row a speculative insertion).
//
// COPY has no ON CONFLICT, so the rules the INSERTs keep are kept another
// way. The transactions of this instance already stored are read first
// (one query by the delivery's source IDs, which validation has made
// unique) and left out, and so are their postings: the first stored version
// of a row is kept, exactly as ON CONFLICT DO NOTHING keeps it. Entry
// numbers are handed out in the same order, a skipped transaction's number
// skipped. The lookup sees only committed rows: should another transaction
// store one of these keys in the meantime (imports of one database queue on
// the counter row, so only a writer outside Import could), the COPY fails
// with a unique violation; the import then rolls back to a savepoint taken
// before it and stores the transactions with the INSERTs instead, in the
// same database transaction. The smaller tables (balances, prices, FX
// rates, index readings, problems), whose keys may repeat within one
// delivery, keep the INSERTs.

// uniqueViolation is PostgreSQL's SQLSTATE for a duplicate key.
const uniqueViolation = "23505"

// copyTransactions stores the transactions of ts not stored yet, and the
// postings of those only, with COPY; it returns how many of each it stored.
func (im *importer) copyTransactions(ctx context.Context, ts []*connectorv1.Transaction) (int, int, error) {
	if len(ts) == 0 {
		return 0, 0, nil
	}
	first := im.next
	if _, err := im.exec(ctx, `SAVEPOINT bulk`); err != nil {
		return 0, 0, fmt.Errorf("transactions: %w", err)
	}
	n, np, err := im.copyNew(ctx, ts)
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == uniqueViolation {
		if _, err := im.exec(ctx, `ROLLBACK TO SAVEPOINT bulk`); err != nil {
			return 0, 0, fmt.Errorf("transactions: %w", err)
		}
		im.next = first
		return im.transactions(ctx, ts)
	}
	if err != nil {
		return 0, 0, err
	}
	return n, np, nil
}

// copyNew looks up which of ts are stored already, then copies the others
// and their postings, streaming from the delivery.
func (im *importer) copyNew(ctx context.Context, ts []*connectorv1.Transaction) (int, int, error) {
	stored, err := im.storedTransactions(ctx, ts)
	if err != nil {
		return 0, 0, fmt.Errorf("transactions: %w", err)
	}
	i := 0
	n, err := im.copyRows(ctx, transactionsTable, func() []any {
		for ; i < len(ts); i++ {
			t, seq := ts[i], im.number()
			if stored[t.GetSourceId()] {
				continue
			}
			i++
			return []any{im.instance, t.GetSourceId(), im.batch, t.GetDate(), t.GetValueDate(), t.GetDescription(), t.GetPayee(), seq}
		}
		return nil
	})
	if err != nil || n == 0 {
		return n, 0, err
	}
	i, j := 0, 0
	np, err := im.copyRows(ctx, postingsTable, func() []any {
		for ; i < len(ts); i, j = i+1, 0 {
			t := ts[i]
			if stored[t.GetSourceId()] || j == len(t.GetPostings()) {
				continue
			}
			p, in := t.GetPostings()[j], t.GetPostings()[j].GetInstrument()
			j++
			return []any{im.instance, t.GetSourceId(), j - 1, p.GetAccountId(), p.GetAmount(), p.GetCurrency(),
				in.GetIsin(), in.GetSymbol(), in.GetExchange(), in.GetCurrency(), in.GetName(), p.GetQuantity(), p.GetMemo()}
		}
		return nil
	})
	return n, np, err
}

// storedTransactions is the set of ts's source IDs this instance has
// stored already (nil when none is).
func (im *importer) storedTransactions(ctx context.Context, ts []*connectorv1.Transaction) (map[string]bool, error) {
	if err := im.s.step(&im.steps); err != nil {
		return nil, err
	}
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.GetSourceId()
	}
	var stored map[string]bool
	err := im.conn.Raw(func(dc any) error {
		rows, err := dc.(*stdlib.Conn).Conn().Query(ctx, `SELECT source_id FROM transactions WHERE instance = $1 AND source_id = ANY($2)`, im.instance, ids)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			if stored == nil {
				stored = make(map[string]bool)
			}
			stored[id] = true
		}
		return rows.Err()
	})
	return stored, err
}

// copyRows copies the rows next yields (nil when done) into t with one
// COPY on the import's connection, inside its transaction.
func (im *importer) copyRows(ctx context.Context, t table, next func() []any) (int, error) {
	if err := im.s.step(&im.steps); err != nil {
		return 0, err
	}
	var n int64
	err := im.conn.Raw(func(dc any) error {
		var err error
		n, err = dc.(*stdlib.Conn).Conn().CopyFrom(ctx, pgx.Identifier{t.name}, t.cols,
			pgx.CopyFromFunc(func() ([]any, error) { return next(), nil }))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", t.name, err)
	}
	return int(n), nil
}
