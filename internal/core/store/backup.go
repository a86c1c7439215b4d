package store

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// backupTable is a table of the record with its primary key, in the order
// a backup holds them and a restore inserts them (parents before children,
// for the foreign keys). Every table of the schema must be here: Backup
// refuses a database with a table this list lacks, and
// TestBackupCoversEveryTable compares the list with the migrated schema.
type backupTable struct {
	name string
	key  string
}

var backupTables = []backupTable{
	{"schema_migrations", "version"},
	{"instances", "instance"},
	{"batches", "instance, batch_id"},
	{"transactions", "instance, source_id"},
	{"postings", "instance, source_id, idx"},
	{"balance_assertions", "instance, account_id, date, currency, isin, symbol, exchange"},
	{"prices", "instance, date, isin, symbol, exchange, currency"},
	{"fx_rates", "instance, date, base_currency, quote_currency"},
	{"index_readings", "instance, index_id, date"},
	{"problems", "instance, problem_key"},
	{"counters", "name"},
	{"view_places", "instance, kind"},
	{"leases", "instance"},
}

// BackupOptions configures Backup.
type BackupOptions struct {
	// Core is the core's version, written into the header.
	Core string
	// Now is the snapshot's time in the header (zero: the wall clock).
	Now time.Time
}

// BackupResult is what Backup wrote.
type BackupResult struct {
	Header BackupHeader
	// Rows counts the rows of each table.
	Rows map[string]int64
	// SHA256 is the trailer's checksum (of the uncompressed content).
	SHA256 string
}

// Backup writes the whole record to w in the backup format (backupformat.go),
// from one snapshot: a read transaction (SQLite; in WAL mode imports go on
// beside it) or a REPEATABLE READ one (PostgreSQL). Rows are read and
// written one at a time, so its memory does not grow with the record.
func (s *Store) Backup(ctx context.Context, w io.Writer, o BackupOptions) (BackupResult, error) {
	opts := &sql.TxOptions{ReadOnly: true}
	if s.d.name == postgresDialect.name {
		opts.Isolation = sql.LevelRepeatableRead
	}
	tx, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return BackupResult{}, fmt.Errorf("store: backup: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // read only: nothing to keep
	res, err := s.backupTx(ctx, tx, w, o)
	if err != nil {
		return BackupResult{}, fmt.Errorf("store: backup: %w", err)
	}
	return res, nil
}

func (s *Store) backupTx(ctx context.Context, tx *sql.Tx, w io.Writer, o BackupOptions) (BackupResult, error) {
	// The first read fixes the snapshot (SQLite's deferred transaction,
	// PostgreSQL's REPEATABLE READ): everything below reads as of it.
	applied, err := appliedVersions(ctx, tx)
	if err != nil {
		return BackupResult{}, err
	}
	tables, err := s.coveredTables(ctx, tx)
	if err != nil {
		return BackupResult{}, err
	}
	if s.backupHook != nil {
		s.backupHook(ctx, tx)
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	h := BackupHeader{T: "header", Format: BackupFormat, Schema: applied, Database: s.d.name, Core: o.Core, Time: o.Now.UTC().Truncate(time.Second)}
	if h.Schema == nil {
		h.Schema = []int{}
	}
	gz := gzip.NewWriter(w)
	sum := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(gz, sum), 64<<10)
	res := BackupResult{Header: h, Rows: map[string]int64{}}
	if err := writeJSONLine(bw, h); err != nil {
		return res, err
	}
	for _, t := range tables {
		n, err := s.backupTable(ctx, tx, bw, t)
		if err != nil {
			return res, fmt.Errorf("%s: %w", t.name, err)
		}
		res.Rows[t.name] = n
	}
	if err := bw.Flush(); err != nil {
		return res, err
	}
	res.SHA256 = hex.EncodeToString(sum.Sum(nil))
	tr := backupTrailer{T: "trailer", Rows: res.Rows, SHA256: res.SHA256}
	line, err := json.Marshal(tr)
	if err != nil {
		return res, err
	}
	if _, err := gz.Write(append(line, '\n')); err != nil {
		return res, err
	}
	return res, gz.Close()
}

// coveredTables lists the record's tables in backupTables' order, and
// refuses a table backupTables lacks: a backup must hold everything. A
// table of backupTables the database lacks (an older schema) is left out.
func (s *Store) coveredTables(ctx context.Context, tx *sql.Tx) ([]backupTable, error) {
	names, err := s.tableNames(ctx, tx)
	if err != nil {
		return nil, err
	}
	var out []backupTable
	for _, t := range backupTables {
		if slices.Contains(names, t.name) {
			out = append(out, t)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(backupTables, func(t backupTable) bool { return t.name == n }) {
			return nil, fmt.Errorf("the database has a table the backup does not cover: %s", limitName(n))
		}
	}
	return out, nil
}

// tableNames lists the tables of the database (of the current schema, in
// PostgreSQL), sorted.
func (s *Store) tableNames(ctx context.Context, q querier) ([]string, error) {
	query := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`
	if s.d.name == postgresDialect.name {
		query = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`
	}
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("list the tables: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("list the tables: %w", err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// tableColumns lists table's columns in their order with their types
// (colText or colInt), as the database declares them.
func (s *Store) tableColumns(ctx context.Context, q querier, table string) (names, types []string, err error) {
	query := `SELECT name, type FROM pragma_table_info(?) ORDER BY cid`
	if s.d.name == postgresDialect.name {
		query = `SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position`
	}
	rows, err := q.QueryContext(ctx, s.d.bind(query), table)
	if err != nil {
		return nil, nil, fmt.Errorf("columns: %w", err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var n, typ string
		if err := rows.Scan(&n, &typ); err != nil {
			return nil, nil, fmt.Errorf("columns: %w", err)
		}
		if !plainName(n) {
			return nil, nil, fmt.Errorf("column %q is not a plain name", n)
		}
		names = append(names, n)
		if strings.Contains(strings.ToUpper(typ), "INT") {
			types = append(types, colInt)
		} else {
			types = append(types, colText)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("no columns")
	}
	return names, types, nil
}

// backupTable writes one table: its line, its rows in primary-key order,
// its end.
func (s *Store) backupTable(ctx context.Context, tx *sql.Tx, w *bufio.Writer, t backupTable) (int64, error) {
	cols, types, err := s.tableColumns(ctx, tx, t.name)
	if err != nil {
		return 0, err
	}
	if err := writeJSONLine(w, backupTableLine{T: "table", Name: t.name, Columns: cols, Types: types}); err != nil {
		return 0, err
	}
	rows, err := tx.QueryContext(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM "+t.name+" ORDER BY "+t.key)
	if err != nil {
		return 0, err
	}
	defer func() { _ = rows.Close() }()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var n int64
	line := make([]byte, 0, 4096)
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return n, err
		}
		line = append(line[:0], '[')
		for i, v := range vals {
			if i > 0 {
				line = append(line, ',')
			}
			if line, err = appendValue(line, v, types[i]); err != nil {
				return n, fmt.Errorf("column %s: %w", cols[i], err)
			}
		}
		line = append(line, ']', '\n')
		if len(line) > MaxBackupLine {
			return n, fmt.Errorf("a row of %d bytes, more than a backup's line may hold (%d)", len(line), MaxBackupLine)
		}
		if _, err := w.Write(line); err != nil {
			return n, err
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return n, err
	}
	return n, writeJSONLine(w, backupEndLine{T: "end", Rows: n})
}

// appendValue appends one column's value as the format writes it.
func appendValue(dst []byte, v any, typ string) ([]byte, error) {
	switch x := v.(type) {
	case int64:
		if typ != colInt {
			return dst, fmt.Errorf("an integer in a text column")
		}
		return strconv.AppendInt(dst, x, 10), nil
	case []byte:
		v = string(x)
	}
	str, ok := v.(string)
	if !ok || typ != colText {
		return dst, fmt.Errorf("a value of type %T in a %s column", v, typ)
	}
	if !utf8.ValidString(str) {
		return dst, fmt.Errorf("text that is not UTF-8")
	}
	return appendJSONString(dst, str), nil
}

func writeJSONLine(w io.Writer, v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(line, '\n'))
	return err
}
