package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// An instance is a Plugin's name together with its UID (OF-38). While its
// Plugin exists the instance's rows are keyed by the name. Once the Plugin is
// gone (or replaced by another of the same name) MarkRemoved moves every row
// to a removed key, name + "~" + tag: '~' is never part of a Plugin name, so
// no live instance can ever read, extend or be mistaken for them, and a new
// Plugin of the same name starts with nothing. The rows stay until the owner
// purges them.

// Errors of the removed instances' API; each is wrapped in a
// *ValidationError naming the argument, or returned as is.
var (
	// ErrUID means a UID is not a Kubernetes UID: 8 to 64 lower-case hex
	// digits and '-', at least 8 of them hex digits.
	ErrUID = errors.New("not a Kubernetes UID: 8 to 64 lower-case hex digits and '-'")
	// ErrKey means a key is neither an instance name nor a removed key
	// (name~tag, the tag lower-case letters, digits and '-', at most 64).
	ErrKey = errors.New("not an instance key: a Plugin name, or a removed instance's name~tag")
	// ErrLive means Purge was asked to delete a live instance: only the
	// data of an uninstalled plugin can be purged.
	ErrLive = errors.New("store: the instance is live (its plugin is installed): only a removed instance's data can be purged; uninstall the plugin first")
	// ErrRemovedAt means MarkRemoved or Claim was given no time.
	ErrRemovedAt = errors.New("required: the time of the removal")
)

// removedSep separates a removed key's name from its tag.
const removedSep = "~"

// maxTag bounds a removed key's tag.
const maxTag = 64

// maxUID bounds a UID (the API server's are 36 bytes).
const maxUID = 64

// validUID reports whether uid looks like a Kubernetes UID.
func validUID(uid string) bool {
	if len(uid) < 8 || len(uid) > maxUID {
		return false
	}
	hexDigits := 0
	for i := 0; i < len(uid); i++ {
		c := uid[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
			hexDigits++
		case c == '-':
		default:
			return false
		}
	}
	return hexDigits >= 8
}

// validTag reports whether tag may follow the '~' of a removed key.
func validTag(tag string) bool {
	if tag == "" || len(tag) > maxTag {
		return false
	}
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// SplitKey splits an instance key into its Plugin name and, for a removed
// instance, its tag; ok is false when key is neither form.
func SplitKey(key string) (name, tag string, ok bool) {
	name, tag, removed := strings.Cut(key, removedSep)
	if !validInstance(name) {
		return "", "", false
	}
	if removed && !validTag(tag) {
		return "", "", false
	}
	return name, tag, true
}

// ValidKey reports whether key is an instance name or a removed key: the
// one rule of an instance key, which the store and the core's owner API
// both check.
func ValidKey(key string) bool {
	_, _, ok := SplitKey(key)
	return ok
}

// LiveInstance is an instance whose rows are keyed by its name.
type LiveInstance struct {
	Name string
	// UID is its Plugin's UID, "" for an instance stored before the core
	// knew UIDs and not claimed since.
	UID string
}

// RemovedInstance is an uninstalled instance whose rows are kept.
type RemovedInstance struct {
	// Key is what its rows are keyed by, and what Purge takes.
	Key string
	// Name is its Plugin's name, UID its Plugin's UID ("" when unknown).
	Name, UID string
	// RemovedAt is when the core marked it removed.
	RemovedAt time.Time
}

// PurgeCounts are the rows Purge deletes (or, in a preview, would delete),
// counted in the tables themselves.
type PurgeCounts struct {
	Rows RowCounts
	// ViewPlaces counts a view's places, one per kind of entry.
	ViewPlaces int
}

// Total is every row counted.
func (c PurgeCounts) Total() int {
	r := c.Rows
	return r.Batches + r.Transactions + r.Postings + r.Balances + r.Prices + r.FxRates + r.IndexReadings + r.Problems + c.ViewPlaces
}

// keyedTables are the tables keyed by instance, parents before children:
// rows are copied in this order and deleted in the reverse, so that every
// foreign key holds after each statement (PostgreSQL checks them at once).
var keyedTables = []string{
	"instances", "batches", "transactions", "postings", "balance_assertions",
	"prices", "fx_rates", "index_readings", "problems", "view_places",
}

// LiveInstances lists the instances keyed by their name, sorted by name: the
// ones with an instances row and those a view's place alone names (a view
// that advanced but never had a row of its own).
func (s *Store) LiveInstances(ctx context.Context) ([]LiveInstance, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT instance, uid FROM instances WHERE removed_at = ''
UNION SELECT DISTINCT instance, '' FROM view_places WHERE instance NOT IN (SELECT instance FROM instances)`)
	if err != nil {
		return nil, fmt.Errorf("store: live instances: %w", err)
	}
	defer func() { _ = rows.Close() }() // read errors come from rows.Err
	var out []LiveInstance
	for rows.Next() {
		var li LiveInstance
		if err := rows.Scan(&li.Name, &li.UID); err != nil {
			return nil, fmt.Errorf("store: live instances: %w", err)
		}
		out = append(out, li)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: live instances: %w", err)
	}
	slices.SortFunc(out, func(a, b LiveInstance) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// RemovedInstances lists the removed instances whose rows are kept, sorted
// by name, then by when they were removed, then by key.
func (s *Store) RemovedInstances(ctx context.Context) ([]RemovedInstance, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT instance, uid, removed_at FROM instances WHERE removed_at <> ''`)
	if err != nil {
		return nil, fmt.Errorf("store: removed instances: %w", err)
	}
	defer func() { _ = rows.Close() }() // read errors come from rows.Err
	var out []RemovedInstance
	for rows.Next() {
		var ri RemovedInstance
		var at string
		if err := rows.Scan(&ri.Key, &ri.UID, &at); err != nil {
			return nil, fmt.Errorf("store: removed instances: %w", err)
		}
		if ri.RemovedAt, err = parseTime(at); err != nil {
			return nil, fmt.Errorf("store: removed instance %s: removed_at: %w", ri.Key, err)
		}
		ri.Name, _, _ = SplitKey(ri.Key)
		out = append(out, ri)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: removed instances: %w", err)
	}
	slices.SortFunc(out, func(a, b RemovedInstance) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		if c := a.RemovedAt.Compare(b.RemovedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out, nil
}

// Claim makes name's live instance the one of the Plugin with uid, before
// the core first calls that Plugin. When the store holds name under another
// UID (a Plugin deleted and created again under the same name while the core
// did not see it), that instance is marked removed at at first, so the new
// one starts with nothing: no watermark, no rows, no view place. An instance
// without a UID is adopted: it was stored by a core from before UIDs, which
// reused a name's rows for whatever Plugin bore it, so the Plugin of that
// name now is the one its owner has seen syncing into those rows (OF-38).
// It returns the key the replaced instance's rows moved to, or "".
func (s *Store) Claim(ctx context.Context, name, uid string, at time.Time) (removedKey string, err error) {
	switch {
	case !validInstance(name):
		return "", refuse("name", ErrInstanceName)
	case !validUID(uid):
		return "", refuse("uid", ErrUID)
	case at.IsZero():
		return "", refuse("at", ErrRemovedAt)
	}
	err = s.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := s.claimTx(ctx, tx, name, uid, at, &removedKey); err != nil {
			return err
		}
		return s.checkFence(ctx, tx, name)
	})
	if err != nil {
		return "", fmt.Errorf("store: claim %s: %w", name, err)
	}
	return removedKey, nil
}

// claimTx is Claim's work inside its transaction.
func (s *Store) claimTx(ctx context.Context, tx *sql.Tx, name, uid string, at time.Time, removedKey *string) error {
	stored, found, err := s.liveUID(ctx, tx, name)
	if err != nil {
		return err
	}
	switch {
	case found && stored == uid:
		return nil
	case found && stored == "":
		_, err := tx.ExecContext(ctx, s.d.bind(`UPDATE instances SET uid = ? WHERE instance = ?`), uid, name)
		return err
	case found:
		if *removedKey, err = s.rekey(ctx, tx, name, stored, at); err != nil {
			return err
		}
	}
	_, err = tx.ExecContext(ctx, s.d.bind(`INSERT INTO instances (instance, uid) VALUES (?, ?)`), name, uid)
	return err
}

// MarkRemoved marks name's live instance removed at at, if the store holds
// it under uid ("" for an instance without one): every row moves, in one
// transaction, to a removed key, which it returns. When the store holds no
// live instance of name, or holds it under another UID (claimed meanwhile
// for a new Plugin), nothing changes and the key is "": so a caller acting
// on what it read a moment ago never marks an instance it did not mean to.
// The caller must make sure nothing stores for the instance any more.
func (s *Store) MarkRemoved(ctx context.Context, name, uid string, at time.Time) (string, error) {
	switch {
	case !validInstance(name):
		return "", refuse("name", ErrInstanceName)
	case uid != "" && !validUID(uid):
		return "", refuse("uid", ErrUID)
	case at.IsZero():
		return "", refuse("at", ErrRemovedAt)
	}
	var key string
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		stored, found, err := s.liveUID(ctx, tx, name)
		if err != nil || !found || stored != uid {
			return err
		}
		if key, err = s.rekey(ctx, tx, name, stored, at); err != nil {
			return err
		}
		return s.revokeLease(ctx, tx, name)
	})
	if err != nil {
		return "", fmt.Errorf("store: mark %s removed: %w", name, err)
	}
	return key, nil
}

// liveUID reads the UID of name's live instance. A name only a view's place
// holds gets an instances row here, without UID, so it can be claimed and
// marked like any other.
func (s *Store) liveUID(ctx context.Context, tx *sql.Tx, name string) (uid string, found bool, err error) {
	var places int
	if err := tx.QueryRowContext(ctx, s.d.bind(`SELECT COUNT(*) FROM view_places WHERE instance = ?`), name).Scan(&places); err != nil {
		return "", false, err
	}
	if places > 0 {
		if _, err := tx.ExecContext(ctx, s.d.bind(`INSERT INTO instances (instance) VALUES (?) ON CONFLICT (instance) DO NOTHING`), name); err != nil {
			return "", false, err
		}
	}
	err = tx.QueryRowContext(ctx, s.d.bind(`SELECT uid FROM instances WHERE instance = ? AND removed_at = ''`+s.d.lockRow), name).Scan(&uid)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return uid, err == nil, err
}

// rekey moves every row of name's live instance to a new removed key and
// records uid and at with it. Rows are copied under the new key, parents
// first, then deleted under the old one, children first: the foreign keys
// do not cascade, and PostgreSQL checks them after every statement. The
// copies take their columns from the tables themselves, so a column a later
// migration adds moves with the rest.
func (s *Store) rekey(ctx context.Context, tx *sql.Tx, name, uid string, at time.Time) (string, error) {
	key, err := s.freeKey(ctx, tx, name, uid, at)
	if err != nil {
		return "", err
	}
	for _, t := range keyedTables {
		cols, err := columns(ctx, tx, t)
		if err != nil {
			return "", err
		}
		sel := make([]string, len(cols))
		args := []any{}
		for i, c := range cols {
			switch {
			case c == "instance":
				sel[i] = "?"
				args = append(args, key)
			case t == "instances" && c == "removed_at":
				sel[i] = "?"
				args = append(args, formatTime(at))
			default:
				sel[i] = c
			}
		}
		q := "INSERT INTO " + t + " (" + strings.Join(cols, ", ") + ") SELECT " + strings.Join(sel, ", ") + " FROM " + t + " WHERE instance = ?"
		if _, err := tx.ExecContext(ctx, s.d.bind(q), append(args, name)...); err != nil {
			return "", fmt.Errorf("%s: %w", t, err)
		}
	}
	if err := s.deleteRows(ctx, tx, name); err != nil {
		return "", err
	}
	return key, nil
}

// deleteRows deletes every row keyed by key, children first.
func (s *Store) deleteRows(ctx context.Context, tx *sql.Tx, key string) error {
	for _, t := range slices.Backward(keyedTables) {
		if _, err := tx.ExecContext(ctx, s.d.bind("DELETE FROM "+t+" WHERE instance = ?"), key); err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
	}
	return nil
}

// columns lists table's columns as the database has them.
func columns(ctx context.Context, tx *sql.Tx, table string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, "SELECT * FROM "+table+" WHERE 1 = 0")
	if err != nil {
		return nil, fmt.Errorf("%s: columns: %w", table, err)
	}
	defer func() { _ = rows.Close() }()
	cols, err := rows.Columns()
	if err != nil {
		return nil, fmt.Errorf("%s: columns: %w", table, err)
	}
	for _, c := range cols {
		for i := 0; i < len(c); i++ {
			if ch := c[i]; !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '_') {
				return nil, fmt.Errorf("%s: column %q is not a plain name", table, c)
			}
		}
	}
	return cols, nil
}

// freeKey picks the removed key of name's instance: its tag is the first 8
// hex digits of uid, or, for an instance without UID, of the SHA-256 of its
// name and removal time. A key already taken gets the whole UID, then a
// counter, so two removed instances of one name never share a key. The key
// is stored, never computed again, so it stays what the owner was shown.
func (s *Store) freeKey(ctx context.Context, tx *sql.Tx, name, uid string, at time.Time) (string, error) {
	digits := strings.ReplaceAll(uid, "-", "")
	var tags []string
	if digits != "" {
		tags = append(tags, digits[:8], digits)
	} else {
		h := sha256.Sum256([]byte(name + "\x00" + formatTime(at)))
		tags = append(tags, hex.EncodeToString(h[:4]), hex.EncodeToString(h[:16]))
	}
	base := tags[len(tags)-1]
	for n := 2; n <= 100; n++ {
		tags = append(tags, base+"-"+strconv.Itoa(n))
	}
	for _, tag := range tags {
		if len(tag) > maxTag {
			tag = tag[:maxTag]
		}
		key := name + removedSep + tag
		var n int
		if err := tx.QueryRowContext(ctx, s.d.bind(`SELECT COUNT(*) FROM instances WHERE instance = ?`), key).Scan(&n); err != nil {
			return "", err
		}
		if n == 0 {
			return key, nil
		}
	}
	return "", fmt.Errorf("no free removed key for %s: purge some of its removed instances", name)
}

// Purge deletes every row of the removed instance key, in one transaction,
// and returns how many rows of each table it deleted; with preview it
// deletes nothing and returns what it would delete. A live instance (its
// plugin installed) is refused with ErrLive, an unknown key with
// ErrUnknownInstance.
func (s *Store) Purge(ctx context.Context, key string, preview bool) (PurgeCounts, error) {
	if !ValidKey(key) {
		return PurgeCounts{}, refuse("key", ErrKey)
	}
	var out PurgeCounts
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var removedAt string
		err := tx.QueryRowContext(ctx, s.d.bind(`SELECT removed_at FROM instances WHERE instance = ?`+s.d.lockRow), key).Scan(&removedAt)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if !strings.Contains(key, removedSep) {
				// A view's places alone, or nothing: live either way.
				var places int
				if err := tx.QueryRowContext(ctx, s.d.bind(`SELECT COUNT(*) FROM view_places WHERE instance = ?`), key).Scan(&places); err != nil {
					return err
				}
				if places > 0 {
					return ErrLive
				}
			}
			return fmt.Errorf("%w: %s", ErrUnknownInstance, key)
		case err != nil:
			return err
		case removedAt == "":
			return ErrLive
		}
		if out, err = s.count(ctx, tx, key); err != nil {
			return err
		}
		if preview {
			return nil
		}
		return s.deleteRows(ctx, tx, key)
	})
	if err != nil {
		if errors.Is(err, ErrLive) || errors.Is(err, ErrUnknownInstance) {
			return PurgeCounts{}, err
		}
		return PurgeCounts{}, fmt.Errorf("store: purge %s: %w", key, err)
	}
	return out, nil
}

// count counts the rows keyed by key in every table.
func (s *Store) count(ctx context.Context, tx *sql.Tx, key string) (PurgeCounts, error) {
	var c PurgeCounts
	for t, n := range map[string]*int{
		"batches": &c.Rows.Batches, "transactions": &c.Rows.Transactions, "postings": &c.Rows.Postings,
		"balance_assertions": &c.Rows.Balances, "prices": &c.Rows.Prices, "fx_rates": &c.Rows.FxRates,
		"index_readings": &c.Rows.IndexReadings, "problems": &c.Rows.Problems, "view_places": &c.ViewPlaces,
	} {
		if err := tx.QueryRowContext(ctx, s.d.bind("SELECT COUNT(*) FROM "+t+" WHERE instance = ?"), key).Scan(n); err != nil {
			return PurgeCounts{}, fmt.Errorf("%s: %w", t, err)
		}
	}
	return c, nil
}

// Count counts the rows key holds in every table (its instances row aside),
// whether it is live or removed.
func (s *Store) Count(ctx context.Context, key string) (PurgeCounts, error) {
	if !ValidKey(key) {
		return PurgeCounts{}, refuse("key", ErrKey)
	}
	var out PurgeCounts
	err := s.inTx(ctx, func(tx *sql.Tx) (err error) {
		out, err = s.count(ctx, tx, key)
		return err
	})
	if err != nil {
		return PurgeCounts{}, fmt.Errorf("store: count %s: %w", key, err)
	}
	return out, nil
}

// inTx runs f in one transaction and commits it when f succeeds.
func (s *Store) inTx(ctx context.Context, f func(*sql.Tx) error) error {
	done, err := s.writeTurn(ctx)
	if err != nil {
		return err
	}
	defer done()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}
