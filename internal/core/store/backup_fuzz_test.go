package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"
)

// seedTime is the fuzz seed backup's time.
var seedTime = time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)

// FuzzBackupReader feeds the backup parser any bytes, gzip'd as a backup
// is: it never panics, never keeps a line over its bound, and either
// refuses with ErrDamagedBackup or reads to a checked trailer.
func FuzzBackupReader(f *testing.F) {
	s, err := Open(context.Background(), filepath.Join(f.TempDir(), "core.db"))
	if err != nil {
		f.Fatal(err)
	}
	if _, err := s.Claim(context.Background(), "bank", "11111111-aaaa", seedTime); err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := s.Backup(context.Background(), &buf, BackupOptions{Now: seedTime}); err != nil {
		f.Fatal(err)
	}
	_ = s.Close()
	zr, err := gzip.NewReader(&buf)
	if err != nil {
		f.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(plain)
	f.Add([]byte(`{"t":"header","format":1,"schema":[],"database":"sqlite","time":"2026-01-01T00:00:00Z"}` + "\n"))
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
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, ErrDamagedBackup) {
			t.Fatalf("error %v is neither the end nor ErrDamagedBackup", err)
		}
	})
}
