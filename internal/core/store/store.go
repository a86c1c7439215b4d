package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver
)

// Store is the core's database: SQLite or PostgreSQL behind one schema. It
// is safe for concurrent use.
type Store struct {
	db *sql.DB
	// leaseDB runs the lease statements: on PostgreSQL a pool of its own,
	// on SQLite (which keeps no leases) db.
	leaseDB *sql.DB
	d       dialect
	// path is the SQLite file, "" on PostgreSQL (Size).
	path string
	// hook, set only by tests, runs between the statements of an import
	// (its argument counts the statements so far); an error it returns
	// fails the import there.
	hook func(step int) error
	// loaded counts the bytes of entries ReadPage read, by their sizes, for
	// the tests that check a page's bound holds before it is read.
	loaded atomic.Int64
	// beforeMigrate, when set, runs before migrations are applied to a
	// database that has some already (premigration.go).
	beforeMigrate func(ctx context.Context, applied []int) error
	// backupHook, set only by tests, runs inside a backup's transaction
	// once its snapshot is fixed, before any table is written.
	backupHook func(ctx context.Context, tx *sql.Tx)
	// writes queues this process's writers of a SQLite file (writeturn.go);
	// nil on PostgreSQL.
	writes chan struct{}
	// groups commits SQLite's unfenced single writes together
	// (writegroup.go).
	groups writeGroups
}

// sqliteParams make every connection wait for the file's lock instead of
// failing, take the write lock when a transaction begins (no deadlocked
// upgrades), check foreign keys, and sync the write-ahead log on commit.
const sqliteParams = "?_txlock=immediate&_busy_timeout=30000&_foreign_keys=1&_journal_mode=WAL&_synchronous=FULL"

// Open connects to the database dsn names and migrates it to the schema
// this binary carries. "postgres://..." or "postgresql://..." selects
// PostgreSQL; "sqlite:PATH" or any other string is a SQLite file path,
// created when missing. Errors never repeat the DSN (it may hold a
// password).
//
// Before it migrates a record that holds data it writes a backup of it
// (OpenOptions, premigration.go); Open uses the default options.
func Open(ctx context.Context, dsn string) (*Store, error) {
	return OpenWith(ctx, dsn, OpenOptions{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, dsn string, o OpenOptions) (*Store, error) {
	return openAt(ctx, dsn, 0, o)
}

// openAt opens dsn and migrates it up to schema version upTo, or to the
// latest when upTo is 0 (tests open older schemas).
func openAt(ctx context.Context, dsn string, upTo int, o OpenOptions) (*Store, error) {
	t, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	var s *Store
	if t.postgres {
		cfg, err := pgx.ParseConfig(t.dsn)
		if err != nil {
			// pgx's message quotes the DSN (password redacted, the rest not).
			return nil, fmt.Errorf("%w: the PostgreSQL DSN does not parse (not shown: it may hold a password)", ErrDSN)
		}
		db := stdlib.OpenDB(*cfg)
		db.SetMaxOpenConns(8)
		db.SetMaxIdleConns(8)
		// The lease statements have connections of their own: a renewal
		// queued behind thousands of syncs' statements would miss the
		// replica's deadline and stop every worker (leases.go).
		leaseDB := stdlib.OpenDB(*cfg)
		leaseDB.SetMaxOpenConns(2)
		leaseDB.SetMaxIdleConns(2)
		s = &Store{db: db, leaseDB: leaseDB, d: postgresDialect}
	} else {
		if err := createPrivate(t.dsn); err != nil {
			return nil, err
		}
		db, err := sql.Open("sqlite", t.dsn+sqliteParams)
		if err != nil {
			return nil, fmt.Errorf("store: open SQLite: %w", err)
		}
		db.SetMaxOpenConns(4)
		db.SetMaxIdleConns(4)
		s = &Store{db: db, leaseDB: db, d: sqliteDialect, path: t.dsn, writes: newWriteTurn()}
	}
	s.beforeMigrate = o.preMigration(s, t)
	if err := s.db.PingContext(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("store: connect to %s: %w", s.d.name, err)
	}
	if err := s.migrate(ctx, upTo); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// createPrivate creates a missing SQLite file readable by its owner only
// (0600): it holds a household's finances. SQLite gives its -wal and -shm
// files the same mode. An existing file is left as it is.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil
	case err != nil:
		return fmt.Errorf("store: create the SQLite file: %w", err)
	}
	return f.Close()
}

// Close closes the database.
func (s *Store) Close() error {
	if s.leaseDB != nil && s.leaseDB != s.db {
		_ = s.leaseDB.Close()
	}
	return s.db.Close()
}

// step runs the test hook, if any, between two statements of an import.
func (s *Store) step(n *int) error {
	*n++
	if s.hook == nil {
		return nil
	}
	return s.hook(*n)
}
