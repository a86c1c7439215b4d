package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// ErrRecordNotEmpty is wrapped when a restore without Replace finds a record
// that holds data.
var ErrRecordNotEmpty = errors.New("the record is not empty")

// NumberGap is what a restore adds to the counter of entry numbers when
// RestoreOptions.NewNumbers is set: more entries than any core stores
// between a backup and its restore, so the numbers the restored core hands
// out are larger than every one the old core may have handed out after the
// snapshot (a view told "no two entries share a number" keeps its word).
const NumberGap = 1 << 32

// RestoreOptions configures Restore.
type RestoreOptions struct {
	// Replace lets a restore replace a record that holds data; without it
	// such a record is refused (ErrRecordNotEmpty).
	Replace bool
	// MaxBytes bounds the backup's uncompressed size (0:
	// DefaultMaxBackupBytes).
	MaxBytes int64
	// Adopt clears the UID of every live instance, so that the Plugin of
	// that name installed now adopts its data (Claim), as it does an
	// instance stored before UIDs: after a reinstall Plugins have new UIDs.
	Adopt bool
	// NewNumbers adds NumberGap to the counter of entry numbers.
	NewNumbers bool
}

// RestoreResult is what Restore restored.
type RestoreResult struct {
	Header BackupHeader
	// Rows counts the rows of each table as the backup held them.
	Rows map[string]int64
	// Replaced counts what the record held before, by table.
	Replaced map[string]int64
}

// Restore replaces the whole record with the backup r holds, in one write
// transaction: all of it or, on any refusal, nothing. It refuses a backup
// of a newer schema than this core knows (ErrNewerSchema), a damaged one
// (ErrDamagedBackup: truncated, a checksum or count that does not match, a
// line that does not parse, a table or column the schema lacks, a bound
// exceeded), and, without Replace, a record that holds data
// (ErrRecordNotEmpty). A backup of an older schema is restored at its
// schema, then migrated, in the same transaction. The backup is read as it
// is inserted, in bounded batches; its checksum is checked at its end,
// before the commit.
func (s *Store) Restore(ctx context.Context, r io.Reader, o RestoreOptions) (RestoreResult, error) {
	all, err := migrations()
	if err != nil {
		return RestoreResult{}, err
	}
	rd, err := newBackupReader(r, o.MaxBytes)
	if err != nil {
		return RestoreResult{}, fmt.Errorf("store: restore: %w", err)
	}
	h := rd.header
	if err := checkKnown(h.Schema, all); err != nil {
		return RestoreResult{}, fmt.Errorf("store: restore: the backup is at schema version %d, and this core knows versions up to %d: %w", h.SchemaVersion(), all[len(all)-1].version, ErrNewerSchema)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return RestoreResult{}, fmt.Errorf("store: restore: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := s.restoreTx(ctx, tx, rd, all, o)
	if err != nil {
		return RestoreResult{}, fmt.Errorf("store: restore: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return RestoreResult{}, fmt.Errorf("store: restore: commit: %w", err)
	}
	return res, nil
}

func (s *Store) restoreTx(ctx context.Context, tx *sql.Tx, rd *backupReader, all []migration, o RestoreOptions) (RestoreResult, error) {
	res := RestoreResult{Header: rd.header, Rows: map[string]int64{}}
	if s.d.migrationLock != "" {
		if _, err := tx.ExecContext(ctx, s.d.migrationLock); err != nil {
			return res, fmt.Errorf("lock: %w", err)
		}
	}
	before, err := s.recordRows(ctx, tx)
	if err != nil {
		return res, err
	}
	if before.total() > 0 && !o.Replace {
		return res, fmt.Errorf("%w: it holds %s; restoring replaces all of it, which must be asked for (replace)", ErrRecordNotEmpty, describeCounts(before))
	}
	res.Replaced = before
	// Start from nothing: drop every table (children first), migrate up
	// to the backup's schema, and empty what the migrations inserted.
	names, err := s.tableNames(ctx, tx)
	if err != nil {
		return res, err
	}
	for _, n := range names {
		if !slices.ContainsFunc(backupTables, func(t backupTable) bool { return t.name == n }) {
			return res, fmt.Errorf("the database has a table a restore does not cover: %s", limitName(n))
		}
	}
	for _, t := range slices.Backward(backupTables) {
		if slices.Contains(names, t.name) {
			if _, err := tx.ExecContext(ctx, "DROP TABLE "+t.name); err != nil {
				return res, fmt.Errorf("drop %s: %w", t.name, err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE schema_migrations (
    version BIGINT NOT NULL PRIMARY KEY,
    name    TEXT   NOT NULL
)`); err != nil {
		return res, fmt.Errorf("schema_migrations: %w", err)
	}
	upTo := rd.header.SchemaVersion()
	if upTo > 0 {
		if err := s.applyMigrations(ctx, tx, all, nil, upTo); err != nil {
			return res, err
		}
	}
	names, err = s.tableNames(ctx, tx)
	if err != nil {
		return res, err
	}
	for _, n := range names {
		if n != "schema_migrations" {
			if _, err := tx.ExecContext(ctx, "DELETE FROM "+n); err != nil {
				return res, fmt.Errorf("empty %s: %w", n, err)
			}
		}
	}
	if err := s.restoreRows(ctx, tx, rd, names, &res); err != nil {
		return res, err
	}
	if err := s.applyMigrations(ctx, tx, all, rd.header.Schema, 0); err != nil {
		return res, err
	}
	if o.Adopt {
		if _, err := tx.ExecContext(ctx, `UPDATE instances SET uid = '' WHERE removed_at = ''`); err != nil {
			return res, fmt.Errorf("adopt: %w", err)
		}
	}
	if o.NewNumbers {
		if _, err := tx.ExecContext(ctx, s.d.bind(`UPDATE counters SET value = value + ? WHERE name = 'entries'`), int64(NumberGap)); err != nil {
			return res, fmt.Errorf("entry numbers: %w", err)
		}
	}
	return res, nil
}

// restoreRows inserts every row the backup holds, table by table, and
// checks that every table of the schema was there.
func (s *Store) restoreRows(ctx context.Context, tx *sql.Tx, rd *backupReader, names []string, res *RestoreResult) error {
	var ins *inserter
	for {
		it, err := rd.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch {
		case it.table != nil:
			if ins, err = s.newInserter(ctx, tx, rd, it.table, names); err != nil {
				return err
			}
		case it.row != nil:
			if err := ins.add(ctx, it.row); err != nil {
				return err
			}
		case it.end:
			if err := ins.flush(ctx); err != nil {
				return err
			}
			res.Rows[ins.table] = rd.rows[ins.table]
		}
	}
	if n := rd.rows["schema_migrations"]; n != int64(len(rd.header.Schema)) {
		return fmt.Errorf("%w: schema_migrations holds %d rows, the header lists %d versions", ErrDamagedBackup, n, len(rd.header.Schema))
	}
	for _, n := range names {
		if _, ok := rd.rows[n]; !ok {
			return fmt.Errorf("%w: table %s of schema version %d is missing from the backup", ErrDamagedBackup, n, rd.header.SchemaVersion())
		}
	}
	return nil
}

// inserter inserts one table's rows in multi-row statements of a bounded
// number of rows.
type inserter struct {
	s     *Store
	tx    *sql.Tx
	table string
	cols  []string
	// order maps the backup's columns to the table's: the value of the
	// backup's column i goes to position order[i].
	order   []int
	pending [][]any
	batch   int
	// schema is set for schema_migrations, whose rows the migrations above
	// wrote: each backup row is compared, not inserted.
	schema map[int64]string
}

// maxInsertRows bounds the rows of one insert statement.
const maxInsertRows = 256

func (s *Store) newInserter(ctx context.Context, tx *sql.Tx, rd *backupReader, t *backupTableLine, names []string) (*inserter, error) {
	if !slices.Contains(names, t.Name) {
		return nil, rd.damaged(fmt.Sprintf("table %s is not a table of schema version %d", t.Name, rd.header.SchemaVersion()))
	}
	cols, types, err := s.tableColumns(ctx, tx, t.Name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.Name, err)
	}
	if len(cols) != len(t.Columns) {
		return nil, rd.damaged(fmt.Sprintf("table %s: %d columns, the schema has %d (%s)", t.Name, len(t.Columns), len(cols), strings.Join(cols, ", ")))
	}
	ins := &inserter{s: s, tx: tx, table: t.Name, cols: cols, order: make([]int, len(cols))}
	for i, c := range t.Columns {
		j := slices.Index(cols, c)
		if j < 0 {
			return nil, rd.damaged(fmt.Sprintf("table %s: column %s is not a column of the table", t.Name, c))
		}
		if types[j] != t.Types[i] {
			return nil, rd.damaged(fmt.Sprintf("table %s: column %s is %s in the backup, %s in the schema", t.Name, c, t.Types[i], types[j]))
		}
		ins.order[i] = j
	}
	ins.batch = max(1, min(maxInsertRows, s.d.maxParams/len(cols)))
	if t.Name == "schema_migrations" {
		ins.schema = map[int64]string{}
		all, err := migrations()
		if err != nil {
			return nil, err
		}
		for _, m := range all {
			ins.schema[int64(m.version)] = m.name
		}
	}
	return ins, nil
}

// add takes one row, inserting a batch once it is full.
func (in *inserter) add(ctx context.Context, row []any) error {
	vals := make([]any, len(row))
	for i, v := range row {
		vals[in.order[i]] = v
	}
	if in.schema != nil {
		v, _ := vals[slices.Index(in.cols, "version")].(int64)
		name, _ := vals[slices.Index(in.cols, "name")].(string)
		if want, ok := in.schema[v]; !ok || want != name {
			return fmt.Errorf("%w: schema_migrations: version %d named %q is not this core's migration of that version", ErrDamagedBackup, v, limitName(name))
		}
		return nil
	}
	in.pending = append(in.pending, vals)
	if len(in.pending) >= in.batch {
		return in.flush(ctx)
	}
	return nil
}

// flush inserts the rows held.
func (in *inserter) flush(ctx context.Context) error {
	if len(in.pending) == 0 {
		return nil
	}
	var q strings.Builder
	q.WriteString("INSERT INTO " + in.table + " (" + strings.Join(in.cols, ", ") + ") VALUES ")
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(in.cols)), ", ") + ")"
	args := make([]any, 0, len(in.pending)*len(in.cols))
	for i, r := range in.pending {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(one)
		args = append(args, r...)
	}
	if _, err := in.tx.ExecContext(ctx, in.s.d.bind(q.String()), args...); err != nil {
		// A row the schema refuses (a repeated key, a missing parent) is
		// a backup that is not a record this core wrote.
		return fmt.Errorf("%w: table %s: the rows do not insert: %v", ErrDamagedBackup, in.table, err)
	}
	in.pending = in.pending[:0]
	return nil
}

// describeCounts says what a record holds, for a refusal.
func describeCounts(c recordCounts) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, c[k]))
	}
	return strings.Join(parts, ", ")
}
