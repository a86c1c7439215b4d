package store

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrDSN is wrapped by every error about the DSN given to Open. Such an
// error never repeats the DSN: it may hold a password.
var ErrDSN = errors.New("store: bad DSN")

// target is the database a DSN selects.
type target struct {
	// postgres is true for a PostgreSQL connection string.
	postgres bool
	// dsn is the PostgreSQL connection string, or the SQLite file path.
	dsn string
}

// parseDSN decides which database dsn names: "postgres://..." or
// "postgresql://..." is PostgreSQL; "sqlite:PATH" or any other string is
// the path of a SQLite file. A path must be non-empty, valid UTF-8, and free
// of NUL and '?' (the driver would read what follows as parameters); SQLite
// URIs ("file:...") and ":memory:" (one database per pooled connection) are
// refused.
func parseDSN(dsn string) (target, error) {
	lower := strings.ToLower(dsn)
	if strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://") {
		return target{postgres: true, dsn: dsn}, nil
	}
	path := dsn
	if strings.HasPrefix(lower, "sqlite:") {
		path = dsn[len("sqlite:"):]
	}
	switch {
	case path == "":
		return target{}, fmt.Errorf("%w: empty SQLite path", ErrDSN)
	case !utf8.ValidString(path) || strings.ContainsAny(path, "\x00?"):
		return target{}, fmt.Errorf("%w: a SQLite path must be UTF-8 without NUL or '?'", ErrDSN)
	case strings.HasPrefix(strings.ToLower(path), "file:"):
		return target{}, fmt.Errorf("%w: SQLite URIs are not accepted: give a plain path or sqlite:PATH", ErrDSN)
	case path == ":memory:" || strings.HasPrefix(path, ":"):
		return target{}, fmt.Errorf("%w: in-memory SQLite is not accepted: give a file path", ErrDSN)
	}
	return target{dsn: path}, nil
}
