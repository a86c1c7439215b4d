package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
)

// fakeBackup is a backup as the core writes one (the CLI checks only that
// it is whole gzip ending in a trailer); cut drops its trailer.
func fakeBackup(t *testing.T, cut bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	lines := []string{
		`{"t":"header","format":1,"schema":[1,2,3],"database":"sqlite","core":"test","time":"2026-12-06T07:00:00Z"}`,
		`{"t":"table","name":"counters","columns":["name","value"],"types":["text","int"]}`,
		`["entries",7]`,
		`{"t":"end","rows":1}`,
	}
	if !cut {
		lines = append(lines, `{"t":"trailer","rows":{"counters":1},"sha256":"00"}`)
	}
	for _, l := range lines {
		_, _ = io.WriteString(zw, l+"\n")
	}
	_ = zw.Close()
	return buf.Bytes()
}

// fakeOwnerCore serves the owner API's backup and restore on loopback, checking
// the owner's token, and records what a restore received.
type fakeOwnerCore struct {
	backup  []byte
	abort   bool
	restore func(w http.ResponseWriter, r *http.Request, body []byte)

	mu       sync.Mutex
	received []byte
	chunked  bool
	query    string
}

func (f *fakeOwnerCore) serve(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+ownerapi.PathBackup, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(ownerapi.HeaderOwnerToken) != "owner-token" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", ownerapi.BackupMediaType)
		if f.abort {
			_, _ = w.Write(f.backup[:len(f.backup)/2])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		_, _ = w.Write(f.backup)
	})
	mux.HandleFunc("POST "+ownerapi.PathRestore, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.received, f.chunked, f.query = body, r.ContentLength == -1, r.URL.RawQuery
		f.mu.Unlock()
		f.restore(w, r, body)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

var ownerMint = func(context.Context) (string, error) { return "owner-token", nil }

// TestCoreBackupToFile: the backup lands in FILE (mode 0600) with its
// SHA-256 printed; a stream cut short, or one without its trailer, fails
// and leaves no FILE; -o is required and never a terminal.
func TestCoreBackupToFile(t *testing.T) {
	f := &fakeOwnerCore{backup: fakeBackup(t, false)}
	url := f.serve(t)
	out := filepath.Join(t.TempDir(), "record.backup.gz")
	r := openfief(t, nil, runOpts{ownerMint: ownerMint}, "core", "backup", "-o", out, "--core-url", url)
	sum := sha256.Sum256(f.backup)
	expect(t, r, ExitOK, "sha256: "+hex.EncodeToString(sum[:]), "1 rows in 1 tables")
	got, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(got, f.backup) {
		t.Fatalf("the file holds %d bytes (%v), want the backup's %d", len(got), err, len(f.backup))
	}
	if info, _ := os.Stat(out); info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", info.Mode().Perm())
	}

	for name, core := range map[string]*fakeOwnerCore{
		"no trailer": {backup: fakeBackup(t, true)},
		"aborted":    {backup: fakeBackup(t, false), abort: true},
	} {
		t.Run(name, func(t *testing.T) {
			url := core.serve(t)
			out := filepath.Join(t.TempDir(), "record.backup.gz")
			r := openfief(t, nil, runOpts{ownerMint: ownerMint}, "core", "backup", "-o", out, "--core-url", url)
			expect(t, r, ExitFailure, "backup")
			if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 0 {
				t.Errorf("a failed backup left %v", entries)
			}
		})
	}
	expect(t, openfief(t, nil, runOpts{}, "core", "backup"), ExitUsage, "-o/--output")
}

// TestCoreBackupToStdout: -o - writes the backup's bytes to standard output
// and the checksum to standard error.
func TestCoreBackupToStdout(t *testing.T) {
	f := &fakeOwnerCore{backup: fakeBackup(t, false)}
	r := openfief(t, nil, runOpts{ownerMint: ownerMint}, "core", "backup", "-o", "-", "--core-url", f.serve(t))
	expect(t, r, ExitOK)
	if r.out != string(f.backup) {
		t.Errorf("standard output holds %d bytes, want the backup's %d", len(r.out), len(f.backup))
	}
	if !strings.Contains(r.errOut, "sha256: ") {
		t.Errorf("no checksum on standard error: %s", r.errOut)
	}
}

// TestCoreRestore: the file is streamed (chunked) to the core after a
// confirmation; --replace is passed on; the core's refusals exit
// ExitInvalid saying nothing changed.
func TestCoreRestore(t *testing.T) {
	backup := fakeBackup(t, false)
	file := filepath.Join(t.TempDir(), "record.backup.gz")
	if err := os.WriteFile(file, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	answer := func(code int, v any) func(http.ResponseWriter, *http.Request, []byte) {
		return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(v)
		}
	}
	f := &fakeOwnerCore{restore: answer(http.StatusOK, ownerapi.RestoreResponse{Schema: 3, Database: "sqlite", Rows: map[string]int64{"counters": 1}, RowsTotal: 1})}
	url := f.serve(t)

	expect(t, openfief(t, nil, runOpts{ownerMint: ownerMint}, "core", "restore", file, "--core-url", url), ExitNotConfirmed, "--yes")
	if f.received != nil {
		t.Fatal("an unconfirmed restore sent the file")
	}
	r := openfief(t, nil, runOpts{ownerMint: ownerMint, interactive: true, stdin: "y\n"}, "core", "restore", file, "--replace", "--core-url", url)
	expect(t, r, ExitOK, "taken 2026-12-06T07:00:00Z from sqlite, schema version 3", "REPLACED", "restored 1 rows", "restored watermarks")
	if !bytes.Equal(f.received, backup) || !f.chunked || f.query != "replace=true" {
		t.Errorf("the core received %d bytes (chunked %v, query %q), want the file's %d, chunked, replace=true", len(f.received), f.chunked, f.query, len(backup))
	}

	for code, want := range map[int]string{
		http.StatusConflict:            "--replace",
		http.StatusBadRequest:          "checksum",
		http.StatusUnprocessableEntity: "newer schema",
	} {
		f.restore = answer(code, ownerapi.ErrorResponse{Error: map[int]string{
			http.StatusConflict:            "store: restore: the record is not empty: it holds instances 2",
			http.StatusBadRequest:          "store: restore: the backup is damaged: the checksum does not match",
			http.StatusUnprocessableEntity: "store: restore: newer schema than this core knows",
		}[code]})
		expect(t, openfief(t, nil, runOpts{ownerMint: ownerMint}, "core", "restore", file, "--yes", "--core-url", url), ExitInvalid, "nothing changed", want)
	}
	expect(t, openfief(t, nil, runOpts{}, "core", "restore"), ExitUsage)
	expect(t, openfief(t, nil, runOpts{}, "core", "restore", file+".missing", "--yes"), ExitUsage, "no such file")
}
