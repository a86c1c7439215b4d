package store

import "context"

// SetImportHook installs hook between the statements of s's imports, for
// the failure-injection tests; nil removes it.
func SetImportHook(s *Store, hook func(step int) error) { s.hook = hook }

// OpenAt opens dsn migrated only up to schema version upTo, as an older
// core left it, for the migration tests.
func OpenAt(ctx context.Context, dsn string, upTo int) (*Store, error) { return openAt(ctx, dsn, upTo) }

// Exec runs one statement on s's database ('?' placeholders), for tests
// that write what an older core wrote.
func Exec(ctx context.Context, s *Store, q string, args ...any) error {
	_, err := s.db.ExecContext(ctx, s.d.bind(q), args...)
	return err
}

// LoadedBytes is the bytes of entries s's ReadPage has read so far, by
// their sizes (Entry.Size), rows it dropped included.
func LoadedBytes(s *Store) int64 { return s.loaded.Load() }
