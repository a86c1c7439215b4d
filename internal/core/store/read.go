package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// ErrNotFound means no row has the key asked for.
var ErrNotFound = errors.New("store: not found")

// Transaction reads back the transaction instance stored under sourceID,
// with its postings in their order, exactly as delivered (decimal strings
// unchanged), or ErrNotFound.
func (s *Store) Transaction(ctx context.Context, instance, sourceID string) (*connectorv1.Transaction, error) {
	t := &connectorv1.Transaction{SourceId: sourceID}
	err := s.db.QueryRowContext(ctx, s.d.bind(`SELECT date, value_date, description, payee FROM transactions
WHERE instance = ? AND source_id = ?`), instance, sourceID).Scan(&t.Date, &t.ValueDate, &t.Description, &t.Payee)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: transaction %q of %s", ErrNotFound, sourceID, instance)
	}
	if err != nil {
		return nil, fmt.Errorf("store: read transaction of %s: %w", instance, err)
	}
	rows, err := s.db.QueryContext(ctx, s.d.bind(`SELECT account_id, amount, currency, isin, symbol, exchange,
instrument_currency, instrument_name, quantity, memo FROM postings
WHERE instance = ? AND source_id = ? ORDER BY idx`), instance, sourceID)
	if err != nil {
		return nil, fmt.Errorf("store: read postings of %s: %w", instance, err)
	}
	defer func() { _ = rows.Close() }() // read errors come from rows.Err
	for rows.Next() {
		p := &connectorv1.Posting{}
		in := &connectorv1.Instrument{}
		if err := rows.Scan(&p.AccountId, &p.Amount, &p.Currency, &in.Isin, &in.Symbol, &in.Exchange,
			&in.Currency, &in.Name, &p.Quantity, &p.Memo); err != nil {
			return nil, fmt.Errorf("store: read postings of %s: %w", instance, err)
		}
		if in.Isin != "" || in.Symbol != "" {
			p.Instrument = in
		}
		t.Postings = append(t.Postings, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read postings of %s: %w", instance, err)
	}
	return t, nil
}
