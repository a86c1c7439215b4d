package store

import (
	"errors"
	"strings"
	"testing"
)

func TestParseDSN(t *testing.T) {
	tests := map[string]struct {
		dsn      string
		postgres bool
		path     string
		bad      bool
	}{
		"postgres":            {dsn: "postgres://core:s3cret@db:5432/openfief?sslmode=require", postgres: true},
		"postgresql":          {dsn: "postgresql://db/openfief", postgres: true},
		"upper-case scheme":   {dsn: "POSTGRES://db/openfief", postgres: true},
		"plain path":          {dsn: "/var/lib/openfief/core.db", path: "/var/lib/openfief/core.db"},
		"relative path":       {dsn: "core.db", path: "core.db"},
		"sqlite: prefix":      {dsn: "sqlite:/data/core.db", path: "/data/core.db"},
		"empty":               {dsn: "", bad: true},
		"sqlite: alone":       {dsn: "sqlite:", bad: true},
		"query in path":       {dsn: "/data/core.db?_pragma=foo", bad: true},
		"NUL":                 {dsn: "/data/co\x00re.db", bad: true},
		"not UTF-8":           {dsn: "/data/\xffcore.db", bad: true},
		"SQLite URI":          {dsn: "file:/data/core.db", bad: true},
		"SQLite URI, prefix":  {dsn: "sqlite:file:core.db", bad: true},
		"in-memory":           {dsn: ":memory:", bad: true},
		"in-memory, prefixed": {dsn: "sqlite::memory:", bad: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseDSN(tt.dsn)
			if tt.bad {
				if !errors.Is(err, ErrDSN) {
					t.Fatalf("parseDSN(%q) = %+v, %v; want ErrDSN", tt.dsn, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseDSN(%q): %v", tt.dsn, err)
			}
			if got.postgres != tt.postgres || (!tt.postgres && got.dsn != tt.path) || (tt.postgres && got.dsn != tt.dsn) {
				t.Errorf("parseDSN(%q) = %+v", tt.dsn, got)
			}
		})
	}
}

// FuzzParseDSN: any string gives either a PostgreSQL DSN, a SQLite path the
// driver will not read parameters from, or ErrDSN; an error never repeats
// the input (it may hold a password).
func FuzzParseDSN(f *testing.F) {
	for _, s := range []string{"postgres://u:pw@h/db", "sqlite:/x.db", "core.db", "file:x", ":memory:", "a?b", "", "sqlite:", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		got, err := parseDSN(dsn)
		if err != nil {
			if !errors.Is(err, ErrDSN) {
				t.Fatalf("error %v does not wrap ErrDSN", err)
			}
			if len(dsn) >= 4 && strings.Contains(err.Error(), dsn) {
				t.Fatalf("error %q repeats the DSN", err)
			}
			return
		}
		if got.postgres {
			return
		}
		if got.dsn == "" || strings.ContainsAny(got.dsn, "?\x00") || strings.HasPrefix(strings.ToLower(got.dsn), "file:") || strings.HasPrefix(got.dsn, ":") {
			t.Fatalf("parseDSN(%q) accepted SQLite path %q", dsn, got.dsn)
		}
	})
}
