package store

import (
	"strconv"
	"strings"
)

// dialect holds every difference between the two databases, so the rest of
// the store writes one SQL for both.
type dialect struct {
	// name is "sqlite" or "postgres", for errors.
	name string
	// numbered placeholders: PostgreSQL wants $1, $2...; SQLite takes ?.
	numbered bool
	// maxParams bounds the parameters of one statement (SQLite's
	// SQLITE_MAX_VARIABLE_NUMBER is 32766, PostgreSQL's protocol 65535).
	maxParams int
	// migrationLock serializes migrations across processes inside the
	// migration transaction; SQLite's BEGIN IMMEDIATE already locks the file.
	migrationLock string
	// lockRow ends a SELECT that locks the rows it reads until the
	// transaction ends (PostgreSQL); SQLite's BEGIN IMMEDIATE has locked
	// the whole file already.
	lockRow string
	// copy: a delivery's transactions and postings are written with COPY
	// (PostgreSQL, bulk.go); SQLite has no COPY and its multi-row INSERTs
	// already outrun a plain insert loop.
	copy bool
	// nowMillis is the database's clock in milliseconds since the Unix
	// epoch, which leases are measured by (leases.go): every replica
	// reads the same clock.
	nowMillis string
}

var (
	sqliteDialect = dialect{name: "sqlite", maxParams: 32766,
		nowMillis: "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"}
	postgresDialect = dialect{
		name: "postgres", numbered: true, maxParams: 65535,
		migrationLock: "SELECT pg_advisory_xact_lock(7468201515)",
		lockRow:       " FOR UPDATE",
		copy:          true,
		nowMillis:     "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
	}
)

// bind rewrites the ? placeholders of q into the dialect's form. The store's
// SQL holds no '?' other than placeholders.
func (d dialect) bind(q string) string {
	if !d.numbered || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + len(q)/4)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] != '?' {
			b.WriteByte(q[i])
			continue
		}
		n++
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}
