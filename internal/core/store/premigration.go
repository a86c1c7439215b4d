package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// A migration rewrites the record in place; should it go wrong (or the new
// core be rolled back) the owner needs the record as it was. So before a
// core applies migrations to a record that holds data, it writes a backup
// of it, and migrates only once that backup is on disk:
//
//   - SQLite: beside the database file (core.db.before-v<N>-<time>.backup.gz,
//     on the same volume, mode 0600), or in OpenOptions.PreMigrationBackupDir;
//   - PostgreSQL: in OpenOptions.PreMigrationBackupDir, which must be given:
//     the database has no file to write beside, and the core's own volume
//     need not hold a copy of a large record, so without a directory the
//     core refuses to migrate (ErrPreMigrationBackupDir) and names the flag.
//
// An empty record (a new database) is migrated without a backup.

// OpenOptions configures OpenWith.
type OpenOptions struct {
	// PreMigrationBackupDir is where the backup taken before a migration
	// goes; empty means beside a SQLite file, and refuses to migrate a
	// PostgreSQL record that holds data.
	PreMigrationBackupDir string
	// Core is the core's version, written into that backup's header.
	Core string
	// Now replaces the wall clock in the backup's name and header (tests).
	Now func() time.Time
}

// ErrPreMigrationBackupDir is wrapped when a PostgreSQL record that holds
// data needs migrations and no directory for the backup before them was
// given.
var ErrPreMigrationBackupDir = errors.New("a PostgreSQL record that holds data is backed up before it is migrated, and no directory was given for that backup")

// preMigration returns the store's beforeMigrate for the database t.
func (o OpenOptions) preMigration(s *Store, t target) func(context.Context, []int) error {
	return func(ctx context.Context, applied []int) error {
		if len(applied) == 0 {
			return nil // a new database: nothing to keep
		}
		empty, err := s.recordEmpty(ctx)
		if err != nil {
			return fmt.Errorf("store: before migrating: %w", err)
		}
		if empty {
			return nil
		}
		dir := o.PreMigrationBackupDir
		if dir == "" && t.postgres {
			return fmt.Errorf("store: the record is at schema version %d and this core migrates it: %w", applied[len(applied)-1], ErrPreMigrationBackupDir)
		}
		if dir == "" {
			dir = filepath.Dir(t.dsn)
		}
		now := time.Now
		if o.Now != nil {
			now = o.Now
		}
		at := now().UTC()
		base := "core.db"
		if !t.postgres {
			base = filepath.Base(t.dsn)
		}
		name := fmt.Sprintf("%s.before-v%d-%s.backup.gz", base, applied[len(applied)-1]+1, at.Format("20060102T150405Z"))
		path := filepath.Join(dir, name)
		if err := s.backupToFile(ctx, path, BackupOptions{Core: o.Core, Now: at}); err != nil {
			return fmt.Errorf("store: the backup before migrating (to %s): %w", path, err)
		}
		return nil
	}
}

// backupToFile writes a backup to path, readable by its owner only, through
// a temporary file synced and renamed into place, so path holds a whole
// backup or nothing.
func (s *Store) backupToFile(ctx context.Context, path string, o BackupOptions) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return err
	}
	if _, err := s.Backup(ctx, tmp, o); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// recordEmpty tells whether the record holds nothing: no row in any table
// but the schema's and the counters', and no entry number handed out.
func (s *Store) recordEmpty(ctx context.Context) (bool, error) {
	n, err := s.recordRows(ctx, s.db)
	if err != nil {
		return false, err
	}
	return n.total() == 0, nil
}

// recordCounts counts a record's rows by table; "entries numbered" counts
// the entry numbers handed out.
type recordCounts map[string]int64

func (c recordCounts) total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// recordRows counts the rows of every table of backupTables the database
// has, but schema_migrations and counters, and the entry numbers handed out.
func (s *Store) recordRows(ctx context.Context, q querier) (recordCounts, error) {
	names, err := s.tableNames(ctx, q)
	if err != nil {
		return nil, err
	}
	out := recordCounts{}
	for _, t := range backupTables {
		if !slices.Contains(names, t.name) || t.name == "schema_migrations" {
			continue
		}
		query := "SELECT COUNT(*) FROM " + t.name
		key := t.name
		if t.name == "counters" {
			query = "SELECT COALESCE(SUM(value), 0) FROM counters"
			key = "entries numbered"
		}
		var n int64
		if err := scanOne(ctx, q, query, &n); err != nil {
			return nil, fmt.Errorf("count %s: %w", t.name, err)
		}
		if n > 0 {
			out[key] = n
		}
	}
	return out, nil
}

func scanOne(ctx context.Context, q querier, query string, dst any) error {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return errors.New("no row")
	}
	if err := rows.Scan(dst); err != nil {
		return err
	}
	return rows.Close()
}
