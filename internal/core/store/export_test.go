package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// SetImportHook installs hook between the statements of s's imports, for
// the failure-injection tests; nil removes it.
func SetImportHook(s *Store, hook func(step int) error) { s.hook = hook }

// OpenAt opens dsn migrated only up to schema version upTo, as an older
// core left it, for the migration tests.
func OpenAt(ctx context.Context, dsn string, upTo int) (*Store, error) {
	return openAt(ctx, dsn, upTo, OpenOptions{})
}

// OpenAtWith is OpenAt with options.
func OpenAtWith(ctx context.Context, dsn string, upTo int, o OpenOptions) (*Store, error) {
	return openAt(ctx, dsn, upTo, o)
}

// Exec runs one statement on s's database ('?' placeholders), for tests
// that write what an older core wrote.
func Exec(ctx context.Context, s *Store, q string, args ...any) error {
	_, err := s.db.ExecContext(ctx, s.d.bind(q), args...)
	return err
}

// LoadedBytes is the bytes of entries s's ReadPage has read so far, by
// their sizes (Entry.Size), rows it dropped included.
func LoadedBytes(s *Store) int64 { return s.loaded.Load() }

// SetBackupHook installs hook inside s's backups, once the snapshot is
// fixed: it gets the dump of every table as the backup sees them.
func SetBackupHook(s *Store, hook func(tables map[string][]string, err error)) {
	if hook == nil {
		s.backupHook = nil
		return
	}
	s.backupHook = func(ctx context.Context, tx *sql.Tx) { hook(dumpTables(ctx, s, tx)) }
}

// DumpTables returns every row of every table of s's database, each row
// printed with its column names, in key order: for comparing two records.
func DumpTables(ctx context.Context, s *Store) (map[string][]string, error) {
	return dumpTables(ctx, s, s.db)
}

func dumpTables(ctx context.Context, s *Store, q querier) (map[string][]string, error) {
	names, err := s.tableNames(ctx, q)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, n := range names {
		key := "1"
		for _, t := range backupTables {
			if t.name == n {
				key = t.key
			}
		}
		rows, err := q.QueryContext(ctx, "SELECT * FROM "+n+" ORDER BY "+key)
		if err != nil {
			return nil, err
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		out[n] = []string{}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				_ = rows.Close()
				return nil, err
			}
			var b strings.Builder
			for i, c := range cols {
				v := vals[i]
				if bs, ok := v.([]byte); ok {
					v = string(bs)
				}
				fmt.Fprintf(&b, "%s=%#v ", c, v)
			}
			out[n] = append(out[n], b.String())
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// BackupTables are the tables a backup covers, in its order.
func BackupTables() []string {
	var out []string
	for _, t := range backupTables {
		out = append(out, t.name)
	}
	return out
}

// TableNames lists the tables of s's database.
func TableNames(ctx context.Context, s *Store) ([]string, error) { return s.tableNames(ctx, s.db) }

// SetCopy turns PostgreSQL's COPY of transactions and postings on or off
// for s (off: the multi-row INSERTs every database can run), so a benchmark
// can set both paths side by side. It does nothing on SQLite.
func SetCopy(s *Store, on bool) {
	if s.d.name == "postgres" {
		s.d.copy = on
	}
}
