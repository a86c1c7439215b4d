package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/arkadiuss/openfief/internal/core/store"
)

// TestOpenHidesPassword: a DSN that cannot connect or does not parse is
// reported without its password (never logged, never in an error).
func TestOpenHidesPassword(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close() // nothing listens there now
	const secret = "hunter2-very-secret"
	for _, dsn := range []string{
		fmt.Sprintf("postgres://core:%s@127.0.0.1:%d/openfief?sslmode=disable&connect_timeout=2", secret, port),
		"postgres://core:" + secret + "@127.0.0.1:%zz/openfief",
		"postgresql://core:" + secret + "@[::1/openfief?sslmode=bogus",
	} {
		_, err := store.Open(context.Background(), dsn)
		if err == nil {
			t.Fatalf("Open succeeded with nothing listening")
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Open's error shows the password: %v", err)
		}
	}
}

// TestOpenRefusesNewerSchema: a database a newer core migrated is not
// touched by an older one (fail closed).
func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "core.db")
	s, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, name) VALUES (999, 'future')`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := store.Open(context.Background(), path); err == nil || !strings.Contains(err.Error(), "999") ||
		!strings.Contains(err.Error(), "up to 4") || !errors.Is(err, store.ErrNewerSchema) {
		if s != nil {
			_ = s.Close()
		}
		t.Fatalf("Open of a database at schema 999 = %v, want ErrNewerSchema naming 999 and this core's 4", err)
	}
}

// TestOpenBadPath: a SQLite file that cannot be created fails Open.
func TestOpenBadPath(t *testing.T) {
	_, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "missing-dir", "core.db"))
	if err == nil {
		t.Fatal("Open in a missing directory succeeded")
	}
	if _, err := store.Open(context.Background(), ":memory:"); !errors.Is(err, store.ErrDSN) {
		t.Fatalf("Open(:memory:) = %v, want ErrDSN", err)
	}
}

// TestSQLiteFilePrivate: a new database file and its write-ahead log are
// readable by their owner only.
func TestSQLiteFilePrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "core.db")
	s, err := store.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if err := s.RecordSync(context.Background(), "nbp-fx", store.SyncRecord{OK: true}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path, path + "-wal"} {
		info, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if mode := info.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s has mode %v, want 0600", filepath.Base(f), mode)
		}
	}
}
