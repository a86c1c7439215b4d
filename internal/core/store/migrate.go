package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one versioned SQL file, migrations/NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations reads the embedded files in version order; a file whose name
// does not start with a version, or a repeated version, is a build error
// the tests catch.
func migrations() ([]migration, error) {
	files, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, f := range files {
		base := strings.TrimSuffix(strings.TrimPrefix(f, "migrations/"), ".sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("store: migration %s: want NNNN_name.sql", f)
		}
		text, err := migrationFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: name, sql: string(text)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("store: migration version %d appears twice", out[i].version)
		}
	}
	return out, nil
}

// statements splits a migration into its statements: each ends with ';' at
// the end of a line. Comment lines are dropped. The migrations hold no ';'
// inside a string.
func statements(text string) []string {
	var out []string
	var cur strings.Builder
	for line := range strings.Lines(text) {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
	}
	if rest := strings.TrimSpace(cur.String()); rest != "" {
		out = append(out, rest)
	}
	return out
}

// migrate applies, in one transaction, every embedded migration the
// database has not recorded in schema_migrations, up to version upTo (0:
// all of them). A database that records a version this binary does not
// know is refused: it was migrated by a newer core. Before a database that
// has migrations already gets more, beforeMigrate runs (premigration.go:
// the backup of a record that holds data).
func (s *Store) migrate(ctx context.Context, upTo int) error {
	all, err := migrations()
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if s.d.migrationLock != "" {
		if _, err := tx.ExecContext(ctx, s.d.migrationLock); err != nil {
			return fmt.Errorf("store: migrate: lock: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
    version BIGINT NOT NULL PRIMARY KEY,
    name    TEXT   NOT NULL
)`); err != nil {
		return fmt.Errorf("store: migrate: schema_migrations: %w", err)
	}
	applied, err := appliedVersions(ctx, tx)
	if err != nil {
		return err
	}
	if err := checkKnown(applied, all); err != nil {
		return err
	}
	if pending(applied, all, upTo) && s.beforeMigrate != nil {
		if err := s.beforeMigrate(ctx, applied); err != nil {
			return err
		}
	}
	if err := s.applyMigrations(ctx, tx, all, applied, upTo); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: migrate: commit: %w", err)
	}
	return nil
}

// checkKnown refuses a database that records a schema version this binary
// does not know: a newer core migrated it.
func checkKnown(applied []int, all []migration) error {
	latest := 0
	if len(all) > 0 {
		latest = all[len(all)-1].version
	}
	for _, v := range applied {
		if !slices.ContainsFunc(all, func(m migration) bool { return m.version == v }) {
			return fmt.Errorf("store: the database has schema version %d, and this core knows versions up to %d: %w (it was migrated by a newer core; run that core, or restore a backup taken at version %d or older)", v, latest, ErrNewerSchema, latest)
		}
	}
	return nil
}

// pending tells whether a migration up to upTo (0: all) is still to apply.
func pending(applied []int, all []migration, upTo int) bool {
	for _, m := range all {
		if !slices.Contains(applied, m.version) && (upTo == 0 || m.version <= upTo) {
			return true
		}
	}
	return false
}

// applyMigrations applies, inside tx, every migration of all that applied
// lacks, up to upTo (0: all), and records each in schema_migrations.
func (s *Store) applyMigrations(ctx context.Context, tx *sql.Tx, all []migration, applied []int, upTo int) error {
	for _, m := range all {
		if slices.Contains(applied, m.version) || (upTo > 0 && m.version > upTo) {
			continue
		}
		for _, stmt := range statements(m.sql) {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("store: migration %04d_%s: %w", m.version, m.name, err)
			}
		}
		if _, err := tx.ExecContext(ctx, s.d.bind(`INSERT INTO schema_migrations (version, name) VALUES (?, ?)`), m.version, m.name); err != nil {
			return fmt.Errorf("store: record migration %04d: %w", m.version, err)
		}
	}
	return nil
}

func appliedVersions(ctx context.Context, tx *sql.Tx) ([]int, error) {
	rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, fmt.Errorf("store: read schema_migrations: %w", err)
	}
	defer func() { _ = rows.Close() }() // read errors come from rows.Err
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("store: read schema_migrations: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Migrations lists the schema versions recorded in the database, in order.
func (s *Store) Migrations(ctx context.Context) ([]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, fmt.Errorf("store: read schema_migrations: %w", err)
	}
	defer func() { _ = rows.Close() }() // read errors come from rows.Err
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
