package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// On PostgreSQL a delivery's entries are written with COPY straight into
// their tables instead of multi-row INSERTs: measured side by side
// (BenchmarkImportVsRaw, docs/performance.md), the INSERTs reached about
// half of a raw COPY of the same rows, the statements themselves being
// most of the gap (thousands of parameters bound, sent and parsed per
// chunk, each row a speculative insertion).
//
// COPY has no ON CONFLICT, so the rules the INSERTs keep are kept another
// way. For each table the keys of the delivery's rows that this instance
// has stored already are read first (one query per table) and those rows
// left out, and so is a row whose key came earlier in the same delivery;
// transactions already stored keep their postings and none are added. So
// the first stored version of a row is kept, exactly as ON CONFLICT DO
// NOTHING keeps it, and entry numbers are handed out in the same order, a
// skipped row's number skipped. A lookup sees only committed rows: should
// another transaction store one of these keys meanwhile (imports of one
// database queue on the counter row, so only a writer outside Import
// could), a COPY fails on the duplicate key; the import then rolls back to
// a savepoint taken before its first entry and stores every entry with the
// INSERTs, in the same database transaction.

// uniqueViolation is PostgreSQL's SQLSTATE for a duplicate key.
const uniqueViolation = "23505"

// copyEntries stores d's entries with COPY, or with the INSERTs when a COPY
// meets a key stored meanwhile; it counts the new rows in res.
func (im *importer) copyEntries(ctx context.Context, d *connectorv1.Delivery, res *ImportResult) error {
	first := im.next
	if _, err := im.exec(ctx, `SAVEPOINT entries`); err != nil {
		return fmt.Errorf("entries: %w", err)
	}
	im.copying = true
	err := im.entries(ctx, d, res)
	im.copying = false
	if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != uniqueViolation {
		return err
	}
	if _, err := im.exec(ctx, `ROLLBACK TO SAVEPOINT entries`); err != nil {
		return fmt.Errorf("entries: %w", err)
	}
	im.next = first
	*res = ImportResult{Duplicate: res.Duplicate}
	return im.entries(ctx, d, res)
}

// copyTransactions stores the transactions of ts not stored yet, and the
// postings of those only, with COPY; it returns how many of each it stored.
func (im *importer) copyTransactions(ctx context.Context, ts []*connectorv1.Transaction) (int, int, error) {
	if len(ts) == 0 {
		return 0, 0, nil
	}
	return im.copyNew(ctx, ts)
}

// copyNew looks up which of ts are stored already, then copies the others
// and their postings, streaming from the delivery.
func (im *importer) copyNew(ctx context.Context, ts []*connectorv1.Transaction) (int, int, error) {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.GetSourceId()
	}
	stored, err := im.storedKeys(ctx, transactionsTable, []string{"source_id"}, [][]string{ids})
	if err != nil {
		return 0, 0, err
	}
	old := func(t *connectorv1.Transaction) bool { return stored != nil && stored[keyOf(t.GetSourceId())] }
	i := 0
	n, err := im.copyRows(ctx, transactionsTable, func() []any {
		for ; i < len(ts); i++ {
			t, seq := ts[i], im.number()
			if old(t) {
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
			if j == len(t.GetPostings()) || old(t) {
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

// copyNewRows copies the rows of vals (len(t.cols) values each, as insert
// takes them) whose key this instance has not stored and no earlier row of
// vals holds.
func (im *importer) copyNewRows(ctx context.Context, t table, vals []any) (int, error) {
	ncols := len(t.cols)
	if len(vals) == 0 {
		return 0, nil
	}
	var keyCols []string
	var at []int
	for k := range strings.SplitSeq(t.key, ", ") {
		if k != "instance" {
			keyCols = append(keyCols, k)
			at = append(at, slices.Index(t.cols, k))
		}
	}
	cols := make([][]string, len(at))
	for i := 0; i < len(vals); i += ncols {
		for c, j := range at {
			cols[c] = append(cols[c], vals[i+j].(string))
		}
	}
	skip, err := im.storedKeys(ctx, t, keyCols, cols)
	if err != nil {
		return 0, err
	}
	if skip == nil {
		skip = make(map[string]bool)
	}
	key := make([]string, len(at))
	i := 0
	return im.copyRows(ctx, t, func() []any {
		for ; i < len(vals); i += ncols {
			for c, j := range at {
				key[c] = vals[i+j].(string)
			}
			k := keyOf(key...)
			if skip[k] {
				continue
			}
			skip[k] = true
			i += ncols
			return vals[i-ncols : i]
		}
		return nil
	})
}

// keyOf encodes a row's key values as one map key, each prefixed with its
// length so no two keys share an encoding.
func keyOf(vs ...string) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String()
}

// storedKeys is the set (by keyOf) of the keys this instance has stored in
// t among those given, column by column in cols (nil when none is).
func (im *importer) storedKeys(ctx context.Context, t table, keyCols []string, cols [][]string) (map[string]bool, error) {
	if err := im.s.step(&im.steps); err != nil {
		return nil, err
	}
	key := strings.Join(keyCols, ", ")
	arrays := make([]string, len(cols))
	args := []any{im.instance}
	for i := range cols {
		arrays[i] = fmt.Sprintf("$%d::text[]", i+2)
		args = append(args, cols[i])
	}
	q := "SELECT " + key + " FROM " + t.name + " WHERE instance = $1 AND (" + key + ") IN (SELECT * FROM unnest(" + strings.Join(arrays, ", ") + "))"
	var stored map[string]bool
	err := im.conn.Raw(func(dc any) error {
		rows, err := dc.(*stdlib.Conn).Conn().Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		vs := make([]string, len(keyCols))
		dest := make([]any, len(vs))
		for i := range vs {
			dest[i] = &vs[i]
		}
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			if stored == nil {
				stored = make(map[string]bool)
			}
			stored[keyOf(vs...)] = true
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.name, err)
	}
	return stored, nil
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
