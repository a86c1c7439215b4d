package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
)

// What the core's metrics read of the store (docs/operations.md#metrics):
// its size and how far a view is behind.

// Size is the bytes the record takes: on SQLite the database file and its
// write-ahead log, what fills the core's volume; on PostgreSQL the
// database's size as pg_database_size reports it.
func (s *Store) Size(ctx context.Context) (int64, error) {
	if s.path == "" {
		var n int64
		if err := s.db.QueryRowContext(ctx, `SELECT pg_database_size(current_database())`).Scan(&n); err != nil {
			return 0, fmt.Errorf("store: size: %w", err)
		}
		return n, nil
	}
	var total int64
	for _, p := range []string{s.path, s.path + "-wal"} {
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist) && p != s.path:
			continue // no log yet, or checkpointed away
		case err != nil:
			return 0, fmt.Errorf("store: size: %w", err)
		}
		total += fi.Size()
	}
	return total, nil
}

// ViewLag counts the entries of the kinds given that view has not kept
// yet: those after its place for each kind, what its next export would
// send.
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
		// k is one of EntryKinds, the names of the tables.
		q := s.d.bind(`SELECT COUNT(*) FROM ` + string(k) + ` WHERE seq > ?`)
		if err := s.db.QueryRowContext(ctx, q, places[k]).Scan(&n); err != nil {
			return 0, fmt.Errorf("store: lag of %s: %s: %w", view, k, err)
		}
		total += n
	}
	return total, nil
}
