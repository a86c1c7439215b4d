package store

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"time"
	"unicode/utf8"
)

// The backup format (docs/operations.md): a gzip stream of lines, each one
// JSON value ending in '\n':
//
//	{"t":"header","format":1,"schema":[1,2,3],"database":"sqlite","core":"v0.4.0","time":"2026-12-06T07:00:00Z"}
//	{"t":"table","name":"instances","columns":["instance",...],"types":["text","int",...]}
//	["nbp-fx","2026-11-27",...]            one line per row, the table's columns in order
//	{"t":"end","rows":2}
//	... every table in turn ...
//	{"t":"trailer","rows":{"instances":2,...},"sha256":"<hex>"}
//
// A row holds strings (text columns) and integers (int columns) only. The
// trailer's sha256 is the SHA-256 of every byte of the uncompressed stream
// before the trailer's line; nothing may follow the trailer.

// BackupFormat is the version of the backup format this core writes and
// reads.
const BackupFormat = 1

// Bounds on reading a backup: it is outside input.
const (
	// MaxBackupLine bounds one line of a backup (a row's JSON): the largest
	// row the delivery rules admit, escaped, is well within it.
	MaxBackupLine = 1 << 20
	// DefaultMaxBackupBytes bounds a backup's uncompressed size when
	// RestoreOptions does not.
	DefaultMaxBackupBytes int64 = 256 << 30
	// maxBackupTables, maxBackupColumns and maxSchemaVersions bound the
	// header's and the tables' lists; maxBackupName a table's or column's
	// name.
	maxBackupTables   = 64
	maxBackupColumns  = 64
	maxSchemaVersions = 10_000
	maxBackupName     = 63
)

// ErrDamagedBackup is wrapped by every refusal of a backup that does not
// read as this format: truncated, a checksum or count that does not match,
// a line that does not parse, a table or column the record does not have,
// a bound exceeded. Nothing was changed.
var ErrDamagedBackup = errors.New("the backup is damaged or not a backup")

// ErrNewerSchema is wrapped when a backup, or a database, has a schema this
// core does not know: a newer core wrote it.
var ErrNewerSchema = errors.New("newer schema than this core knows")

// BackupHeader is a backup's first line.
type BackupHeader struct {
	T string `json:"t"`
	// Format is BackupFormat.
	Format int `json:"format"`
	// Schema lists the migrations applied to the record (1, 2, ... n).
	Schema []int `json:"schema"`
	// Database is "sqlite" or "postgres": where the backup was taken.
	Database string `json:"database"`
	// Core is the version of the core that wrote it (informative).
	Core string `json:"core,omitempty"`
	// Time is when the snapshot was taken.
	Time time.Time `json:"time"`
}

// SchemaVersion is the last migration the backup's record had applied (0:
// none).
func (h BackupHeader) SchemaVersion() int {
	if len(h.Schema) == 0 {
		return 0
	}
	return h.Schema[len(h.Schema)-1]
}

// backupTableLine starts a table.
type backupTableLine struct {
	T       string   `json:"t"`
	Name    string   `json:"name"`
	Columns []string `json:"columns"`
	Types   []string `json:"types"`
}

// backupEndLine ends a table.
type backupEndLine struct {
	T    string `json:"t"`
	Rows int64  `json:"rows"`
}

// backupTrailer is the last line.
type backupTrailer struct {
	T      string           `json:"t"`
	Rows   map[string]int64 `json:"rows"`
	SHA256 string           `json:"sha256"`
}

// The two column types of the record.
const (
	colText = "text"
	colInt  = "int"
)

// backupItem is what backupReader.next returns: the start of a table (its
// line), one row of it, or the end of a table.
type backupItem struct {
	table *backupTableLine
	row   []any // string or int64, one per column
	end   bool
}

// backupReader reads a backup with every bound checked before anything is
// kept: it knows the format, not the database (restore.go checks the tables
// and columns against the record).
type backupReader struct {
	br       *bufio.Reader
	gz       *gzip.Reader
	sum      hash.Hash
	max      int64
	read     int64
	line     int64
	header   BackupHeader
	cur      *backupTableLine
	curRows  int64
	rows     map[string]int64
	finished bool
	// long gathers a line longer than br's buffer.
	long []byte
}

// newBackupReader opens a backup and reads its header.
func newBackupReader(r io.Reader, maxBytes int64) (*backupReader, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBackupBytes
	}
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("%w: not gzip: %v", ErrDamagedBackup, err)
	}
	gz.Multistream(false)
	b := &backupReader{br: bufio.NewReaderSize(gz, 64<<10), gz: gz, sum: sha256.New(), max: maxBytes, rows: map[string]int64{}}
	raw, err := b.readLine()
	if err != nil {
		return nil, err
	}
	if err := strictJSON(raw, &b.header); err != nil || b.header.T != "header" {
		return nil, b.damaged("the first line is not a backup header")
	}
	b.sum.Write(raw)
	h := b.header
	switch {
	case h.Format != BackupFormat:
		return nil, b.damaged(fmt.Sprintf("format %d: this core reads format %d", h.Format, BackupFormat))
	case len(h.Schema) > maxSchemaVersions:
		return nil, b.damaged(fmt.Sprintf("schema: more than %d versions", maxSchemaVersions))
	case h.Database != "sqlite" && h.Database != "postgres":
		return nil, b.damaged("database: want sqlite or postgres")
	case len(h.Core) > 128 || !utf8.ValidString(h.Core):
		return nil, b.damaged("core: at most 128 bytes of UTF-8")
	}
	for i, v := range h.Schema {
		if v != i+1 {
			return nil, b.damaged(fmt.Sprintf("schema: versions must run 1, 2, 3... (the %d. is %d)", i+1, v))
		}
	}
	return b, nil
}

// damaged is a refusal at the line just read.
func (b *backupReader) damaged(why string) error {
	return fmt.Errorf("%w: line %d: %s", ErrDamagedBackup, b.line, why)
}

// readLine reads the next line, counted into the size bound. A line
// longer than the reader's buffer is gathered in long, up to MaxBackupLine.
// The line is valid until the next read; readLine hashes nothing (the
// caller decides: the trailer is not part of the checksum).
func (b *backupReader) readLine() ([]byte, error) {
	b.line++
	b.long = b.long[:0]
	for {
		raw, err := b.br.ReadSlice('\n')
		if len(b.long)+len(raw) > MaxBackupLine {
			return nil, b.damaged(fmt.Sprintf("longer than %d bytes", MaxBackupLine))
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			b.long = append(b.long, raw...)
			continue
		}
		if len(b.long) > 0 {
			b.long = append(b.long, raw...)
			raw = b.long
		}
		switch {
		case errors.Is(err, io.EOF) && len(raw) == 0:
			return nil, b.damaged("the backup ends here: truncated (no trailer)")
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil, b.damaged("the backup ends inside a line: truncated")
		case err != nil:
			return nil, fmt.Errorf("%w: line %d: %v", ErrDamagedBackup, b.line, err)
		}
		b.read += int64(len(raw))
		if b.read > b.max {
			return nil, b.damaged(fmt.Sprintf("the backup is larger than %d bytes uncompressed", b.max))
		}
		return raw, nil
	}
}

// next returns the next item; io.EOF once the trailer is read and checked
// (the counts, the checksum, and nothing after it).
func (b *backupReader) next() (backupItem, error) {
	if b.finished {
		return backupItem{}, io.EOF
	}
	raw, err := b.readLine()
	if err != nil {
		return backupItem{}, err
	}
	if b.cur != nil && raw[0] == '[' {
		row, err := b.parseRow(raw)
		if err != nil {
			return backupItem{}, err
		}
		b.sum.Write(raw)
		b.curRows++
		return backupItem{row: row}, nil
	}
	var kind struct {
		T string `json:"t"`
	}
	if json.Unmarshal(raw, &kind) != nil {
		return backupItem{}, b.damaged("not a JSON object or a row")
	}
	switch {
	case kind.T == "table" && b.cur == nil:
		var t backupTableLine
		if err := strictJSON(raw, &t); err != nil {
			return backupItem{}, b.damaged("table: " + err.Error())
		}
		if err := b.checkTable(&t); err != nil {
			return backupItem{}, err
		}
		b.sum.Write(raw)
		b.cur, b.curRows = &t, 0
		return backupItem{table: &t}, nil
	case kind.T == "end" && b.cur != nil:
		var e backupEndLine
		if err := strictJSON(raw, &e); err != nil {
			return backupItem{}, b.damaged("end: " + err.Error())
		}
		if e.Rows != b.curRows {
			return backupItem{}, b.damaged(fmt.Sprintf("table %s: the end counts %d rows, %d were read", b.cur.Name, e.Rows, b.curRows))
		}
		b.sum.Write(raw)
		b.rows[b.cur.Name] = b.curRows
		b.cur = nil
		return backupItem{end: true}, nil
	case kind.T == "trailer" && b.cur == nil:
		return backupItem{}, b.finish(raw)
	}
	return backupItem{}, b.damaged(fmt.Sprintf("a %q line is not expected here", limitName(kind.T)))
}

// checkTable checks a table's line: a plain name not seen before, plain
// column names, each once, each with a known type.
func (b *backupReader) checkTable(t *backupTableLine) error {
	if !plainName(t.Name) {
		return b.damaged("table: the name is not a plain lower-case name")
	}
	if _, seen := b.rows[t.Name]; seen {
		return b.damaged("table " + t.Name + " appears twice")
	}
	if len(b.rows) >= maxBackupTables {
		return b.damaged(fmt.Sprintf("more than %d tables", maxBackupTables))
	}
	if len(t.Columns) == 0 || len(t.Columns) > maxBackupColumns || len(t.Types) != len(t.Columns) {
		return b.damaged(fmt.Sprintf("table %s: want 1 to %d columns, each with a type", t.Name, maxBackupColumns))
	}
	seen := map[string]bool{}
	for i, c := range t.Columns {
		if !plainName(c) || seen[c] {
			return b.damaged(fmt.Sprintf("table %s: column %d is not a plain name, or repeated", t.Name, i+1))
		}
		seen[c] = true
		if t.Types[i] != colText && t.Types[i] != colInt {
			return b.damaged(fmt.Sprintf("table %s: column %s: the type is not text or int", t.Name, c))
		}
	}
	return nil
}

// parseRow decodes one row of the current table: a JSON array of exactly
// its columns, strings for text and integers for int columns.
func (b *backupReader) parseRow(raw []byte) ([]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var vals []any
	if err := dec.Decode(&vals); err != nil {
		return nil, b.damaged(fmt.Sprintf("table %s: a row does not parse: %v", b.cur.Name, err))
	}
	if dec.More() {
		return nil, b.damaged(fmt.Sprintf("table %s: text after a row", b.cur.Name))
	}
	if len(vals) != len(b.cur.Columns) {
		return nil, b.damaged(fmt.Sprintf("table %s: a row of %d values, want %d", b.cur.Name, len(vals), len(b.cur.Columns)))
	}
	for i, v := range vals {
		col := b.cur.Columns[i]
		switch b.cur.Types[i] {
		case colText:
			s, ok := v.(string)
			if !ok {
				return nil, b.damaged(fmt.Sprintf("table %s: column %s: want a string", b.cur.Name, col))
			}
			vals[i] = s
		case colInt:
			n, ok := v.(json.Number)
			if !ok {
				return nil, b.damaged(fmt.Sprintf("table %s: column %s: want an integer", b.cur.Name, col))
			}
			i64, err := strconv.ParseInt(string(n), 10, 64)
			if err != nil {
				return nil, b.damaged(fmt.Sprintf("table %s: column %s: want a 64-bit integer", b.cur.Name, col))
			}
			vals[i] = i64
		}
	}
	return vals, nil
}

// finish checks the trailer: the tables it counts are those read, with the
// same counts; the checksum is that of everything before it; the gzip
// stream ends right after it.
func (b *backupReader) finish(raw []byte) error {
	var tr backupTrailer
	if err := strictJSON(raw, &tr); err != nil {
		return b.damaged("trailer: " + err.Error())
	}
	if len(tr.Rows) != len(b.rows) {
		return b.damaged(fmt.Sprintf("trailer: counts %d tables, %d were read", len(tr.Rows), len(b.rows)))
	}
	for name, n := range b.rows {
		if got, ok := tr.Rows[name]; !ok || got != n {
			return b.damaged(fmt.Sprintf("trailer: table %s: counts %d rows, %d were read", name, got, n))
		}
	}
	if want := hex.EncodeToString(b.sum.Sum(nil)); tr.SHA256 != want {
		return b.damaged("the checksum (SHA-256) does not match the content: the file was changed or damaged")
	}
	// Nothing may follow: another line, or bytes after the gzip stream.
	switch n, err := b.br.Read(make([]byte, 1)); {
	case n != 0:
		return b.damaged("data after the trailer")
	case !errors.Is(err, io.EOF):
		return b.damaged(fmt.Sprintf("the gzip stream does not end cleanly after the trailer: %v", err))
	}
	b.finished = true
	return io.EOF
}

// strictJSON decodes one JSON object into v, refusing unknown fields and
// anything after it.
func strictJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("text after the object")
	}
	return nil
}

// plainName is a table's or column's name as the record has them: lower-case
// letters, digits and '_', starting with a letter.
func plainName(s string) bool {
	if s == "" || len(s) > maxBackupName || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if ch := s[i]; !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '_') {
			return false
		}
	}
	return true
}

// limitName bounds a name from a backup that an error repeats; an unsafe
// one is not repeated.
func limitName(s string) string {
	if !plainName(s) {
		return "(not a plain name)"
	}
	return s
}

// appendJSONString appends s as a JSON string. s is valid UTF-8 (the
// caller checked).
func appendJSONString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}
