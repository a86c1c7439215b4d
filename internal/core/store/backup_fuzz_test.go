package store

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
)

// seedBackup is a small whole backup's uncompressed content, as Backup
// writes it, for the fuzzer to start from. It is built without a database:
// the fuzz target parses, and SQLite under the fuzzer's instrumentation
// would be most of its time.
func seedBackup() []byte {
	body := strings.Join([]string{
		`{"t":"header","format":1,"schema":[1,2,3],"database":"sqlite","core":"fuzz","time":"2026-12-06T07:00:00Z"}`,
		`{"t":"table","name":"instances","columns":["instance","watermark","batches","uid"],"types":["text","text","int","text"]}`,
		`["bank","w\n\"1\"",3,"11111111-aaaa"]`,
		`["nbp","",-1,""]`,
		`{"t":"end","rows":2}`,
		`{"t":"table","name":"counters","columns":["name","value"],"types":["text","int"]}`,
		`["entries",9223372036854775807]`,
		`{"t":"end","rows":1}`,
	}, "\n") + "\n"
	sum := sha256.Sum256([]byte(body))
	return []byte(body + `{"t":"trailer","rows":{"instances":2,"counters":1},"sha256":"` + hex.EncodeToString(sum[:]) + `"}` + "\n")
}

// TestSeedBackupReads: the fuzzer's seed is a whole backup to the parser.
func TestSeedBackupReads(t *testing.T) {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(seedBackup())
	_ = zw.Close()
	rd, err := newBackupReader(&z, 0)
	for err == nil {
		_, err = rd.next()
	}
	if !errors.Is(err, io.EOF) || rd.rows["instances"] != 2 || rd.rows["counters"] != 1 {
		t.Fatalf("the seed reads to %v with rows %v", err, rd.rows)
	}
}

// FuzzBackupReader feeds the backup parser any content, gzip'd as a backup
// is: it never panics, never hands out a row of another width than its
// table's, keeps no line over its bound, and either refuses with
// ErrDamagedBackup or reads to a checked trailer.
func FuzzBackupReader(f *testing.F) {
	f.Add(seedBackup())
	f.Add([]byte(`{"t":"header","format":1,"schema":[],"database":"postgres","time":"2026-01-01T00:00:00Z"}` + "\n"))
	f.Add([]byte("[1,2]\n"))
	f.Fuzz(func(t *testing.T, plain []byte) {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		_, _ = zw.Write(plain)
		_ = zw.Close()
		rd, err := newBackupReader(&z, 1<<20)
		for err == nil {
			var it backupItem
			it, err = rd.next()
			if it.row != nil && len(it.row) != len(rd.cur.Columns) {
				t.Fatalf("a row of %d values for %d columns", len(it.row), len(rd.cur.Columns))
			}
			for _, v := range it.row {
				switch v.(type) {
				case string, int64:
				default:
					t.Fatalf("a value of type %T", v)
				}
			}
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, ErrDamagedBackup) {
			t.Fatalf("error %v is neither the end nor ErrDamagedBackup", err)
		}
	})
}

// TestLongLines: a line longer than the reader's buffer is read whole, and
// one over MaxBackupLine is refused before more of it is kept.
func TestLongLines(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	for _, c := range []struct {
		value string
		want  error
	}{{long, io.EOF}, {strings.Repeat("y", MaxBackupLine), ErrDamagedBackup}} {
		body := `{"t":"header","format":1,"schema":[],"database":"sqlite","time":"2026-01-01T00:00:00Z"}` + "\n" +
			`{"t":"table","name":"t","columns":["v"],"types":["text"]}` + "\n" + `["` + c.value + `"]` + "\n" + `{"t":"end","rows":1}` + "\n"
		sum := sha256.Sum256([]byte(body))
		plain := body + `{"t":"trailer","rows":{"t":1},"sha256":"` + hex.EncodeToString(sum[:]) + `"}` + "\n"
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		_, _ = zw.Write([]byte(plain))
		_ = zw.Close()
		rd, err := newBackupReader(&z, 0)
		var got []any
		for err == nil {
			var it backupItem
			it, err = rd.next()
			if it.row != nil {
				got = it.row
			}
		}
		if !errors.Is(err, c.want) {
			t.Fatalf("a line of %d bytes: %v, want %v", len(c.value), err, c.want)
		}
		if c.want == io.EOF && (len(got) != 1 || got[0] != c.value) {
			t.Errorf("the long value came back as %d values", len(got))
		}
		if c.want != io.EOF && !strings.Contains(err.Error(), "longer than") {
			t.Errorf("the refusal %v does not name the bound", err)
		}
	}
}
