package store

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMigrationsEmbedded(t *testing.T) {
	all, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range all {
		if m.version != i+1 {
			t.Errorf("migration %d has version %d: versions must run 1, 2, 3... without gaps", i, m.version)
		}
		if len(statements(m.sql)) == 0 {
			t.Errorf("migration %04d_%s has no statements", m.version, m.name)
		}
	}
}

func TestStatements(t *testing.T) {
	got := statements("-- a comment\nCREATE TABLE a (\n    x TEXT\n);\n\n-- another\nCREATE TABLE b (y TEXT);\nSELECT 1")
	want := []string{"CREATE TABLE a (\n    x TEXT\n);", "CREATE TABLE b (y TEXT);", "SELECT 1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statements (-want +got):\n%s", diff)
	}
}

func TestBind(t *testing.T) {
	q := "INSERT INTO t (a, b) VALUES (?, ?), (?, ?)"
	if got := sqliteDialect.bind(q); got != q {
		t.Errorf("sqlite bind = %q", got)
	}
	if got, want := postgresDialect.bind(q), "INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4)"; got != want {
		t.Errorf("postgres bind = %q, want %q", got, want)
	}
}
