package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
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
