package store

import (
	"context"
	"fmt"
	"slices"
)

// ViewLag counts the entries of the kinds given that view has not been sent
// yet: those numbered after its place for each kind. It is what `openfief
// status` and the dashboard call a view's lag; an entry of a kind the view
// may not be sent is not counted.
func (s *Store) ViewLag(ctx context.Context, view string, kinds []EntryKind) (int64, error) {
	places, err := s.ViewPlaces(ctx, view)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, k := range EntryKinds {
		if !slices.Contains(kinds, k) {
			continue
		}
		var n int64
		// k is one of EntryKinds, the names of their tables: never input.
		q := fmt.Sprintf(`SELECT COUNT(*) FROM %s WHERE seq > ?`, k)
		if err := s.db.QueryRowContext(ctx, s.d.bind(q), places[k]).Scan(&n); err != nil {
			return 0, fmt.Errorf("store: lag of %s: %s: %w", view, k, err)
		}
		total += n
	}
	return total, nil
}
