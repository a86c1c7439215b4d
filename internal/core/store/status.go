package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"
	"unicode/utf8"
)

// ErrUnknownInstance means the store has nothing of an instance: it never
// imported or recorded a sync.
var ErrUnknownInstance = errors.New("store: unknown instance")

// MaxSyncError bounds the error message RecordSync keeps, in bytes.
const MaxSyncError = 1_024

// SyncRecord is the outcome of one sync attempt of an instance, as the
// scheduler saw it (OF-8).
type SyncRecord struct {
	// At is when the attempt ended.
	At time.Time
	// OK is true when the delivery was imported.
	OK bool
	// Error is the failure's message, empty when OK. It must never hold a
	// token; RecordSync redacts anything shaped like a JWT all the same.
	Error string
	// Next is when the scheduler will try next, or zero when it will not.
	Next time.Time
}

// RowCounts are the rows the store holds for one instance.
type RowCounts struct {
	Batches, Transactions, Postings, Balances, Prices, FxRates, IndexReadings, Problems int
}

// InstanceRecord is what the store holds of one instance: its last and
// next sync, its watermark and its row counts. The core turns it into the
// owner API's ownerapi.InstanceStatus, which `openfief plugin status` shows.
type InstanceRecord struct {
	// LastSync is when the last sync attempt ended, zero if none did.
	LastSync time.Time
	// LastOK is true when that attempt succeeded.
	LastOK bool
	// LastError is that attempt's error message, empty when it succeeded.
	LastError string
	// NextSync is when the next attempt is planned, zero if none is.
	NextSync time.Time
	// Watermark is the watermark the next Sync will be given.
	Watermark string
	// Rows counts the rows stored for the instance.
	Rows RowCounts
	// UID is the instance's Plugin UID, "" when the store does not know it
	// (stored before the core recorded UIDs, or never claimed).
	UID string
	// RemovedAt is when the instance was marked removed (its Plugin
	// uninstalled or replaced), zero while it is live (OF-38).
	RemovedAt time.Time
}

// Watermark returns the watermark saved by instance's last imported Sync,
// or "" when there is none yet (the first Sync).
func (s *Store) Watermark(ctx context.Context, instance string) (string, error) {
	if !validInstance(instance) {
		return "", refuse("instance", ErrInstanceName)
	}
	var w string
	err := s.db.QueryRowContext(ctx, s.d.bind(`SELECT watermark FROM instances WHERE instance = ?`), instance).Scan(&w)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store: watermark of %s: %w", instance, err)
	}
	return w, nil
}

// jwtShape matches a compact JWS, so a token that slipped into an error
// message is not stored.
var jwtShape = regexp.MustCompile(`eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*`)

// cleanError bounds msg to MaxSyncError bytes of valid UTF-8 without NUL
// and redacts token-shaped text.
func cleanError(msg string) string {
	msg = jwtShape.ReplaceAllString(msg, "[redacted]")
	msg = toValidUTF8(msg)
	if len(msg) > MaxSyncError {
		cut := MaxSyncError
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

// toValidUTF8 replaces invalid bytes and NUL with U+FFFD.
func toValidUTF8(s string) string {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		if r == 0 {
			r = utf8.RuneError
		}
		out = append(out, r)
	}
	return string(out)
}

// RecordSync saves the outcome of one sync attempt of instance, whether or
// not it imported anything.
func (s *Store) RecordSync(ctx context.Context, instance string, r SyncRecord) error {
	if !validInstance(instance) {
		return refuse("instance", ErrInstanceName)
	}
	ok := 0
	if r.OK {
		ok = 1
	}
	err := s.fenced(ctx, instance, func(e execer) error {
		_, err := e.ExecContext(ctx, s.d.bind(`INSERT INTO instances (instance, last_sync_at, last_sync_ok, last_error, next_sync_at)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (instance) DO UPDATE SET last_sync_at = excluded.last_sync_at, last_sync_ok = excluded.last_sync_ok,
last_error = excluded.last_error, next_sync_at = excluded.next_sync_at`),
			instance, formatTime(r.At), ok, cleanError(r.Error), formatTime(r.Next))
		return err
	})
	if err != nil {
		return fmt.Errorf("store: record sync of %s: %w", instance, err)
	}
	return nil
}

// Status returns the record of instance, a live instance's name or a
// removed instance's key (its last and next sync and its row counts), or
// ErrUnknownInstance.
func (s *Store) Status(ctx context.Context, instance string) (InstanceRecord, error) {
	if !ValidKey(instance) {
		return InstanceRecord{}, refuse("instance", ErrKey)
	}
	var st InstanceRecord
	var last, next, removed string
	var ok int
	c := &st.Rows
	err := s.db.QueryRowContext(ctx, s.d.bind(`SELECT last_sync_at, last_sync_ok, last_error, next_sync_at, watermark,
batches, transactions, postings, balances, prices, fx_rates, index_readings, problems, uid, removed_at
FROM instances WHERE instance = ?`), instance).Scan(&last, &ok, &st.LastError, &next, &st.Watermark,
		&c.Batches, &c.Transactions, &c.Postings, &c.Balances, &c.Prices, &c.FxRates, &c.IndexReadings, &c.Problems, &st.UID, &removed)
	if errors.Is(err, sql.ErrNoRows) {
		return InstanceRecord{}, fmt.Errorf("%w: %s", ErrUnknownInstance, instance)
	}
	if err != nil {
		return InstanceRecord{}, fmt.Errorf("store: status of %s: %w", instance, err)
	}
	st.LastOK = ok == 1
	if st.LastSync, err = parseTime(last); err != nil {
		return InstanceRecord{}, fmt.Errorf("store: status of %s: last_sync_at: %w", instance, err)
	}
	if st.NextSync, err = parseTime(next); err != nil {
		return InstanceRecord{}, fmt.Errorf("store: status of %s: next_sync_at: %w", instance, err)
	}
	if st.RemovedAt, err = parseTime(removed); err != nil {
		return InstanceRecord{}, fmt.Errorf("store: status of %s: removed_at: %w", instance, err)
	}
	return st, nil
}

// Instances lists every live instance the store holds anything of, sorted;
// RemovedInstances lists the removed ones.
func (s *Store) Instances(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT instance FROM instances WHERE removed_at = ''`)
	if err != nil {
		return nil, fmt.Errorf("store: instances: %w", err)
	}
	defer func() { _ = rows.Close() }() // read errors come from rows.Err
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("store: instances: %w", err)
		}
		out = append(out, name)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: instances: %w", err)
	}
	// Sorted here, not by ORDER BY: PostgreSQL's collation may differ from
	// byte order.
	slices.Sort(out)
	return out, nil
}

// formatTime writes t as RFC 3339 in UTC with nanoseconds, "" for zero.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339Nano, s)
}
