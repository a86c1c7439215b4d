package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Leases: which replica of the core serves an instance, when the core runs
// as several replicas on one PostgreSQL database. A replica holds an
// instance's lease until its expiry, measured by the database's clock, so
// the replicas' own clocks never have to agree; it renews every lease it
// holds in one statement. A lease that expired may be taken by any
// replica, and each change of hands raises its epoch. A replica writes an
// instance's data under a Fence (WithFence): the write's transaction checks,
// as its last statement before committing, that the replica still holds
// the lease under the same epoch and that it has not expired, and locks the
// lease row until the commit, so a takeover waits for a write in progress
// and a write after a takeover (or after the expiry) stores nothing.

// ErrFenced is a write refused because the replica no longer holds the
// instance's lease under its epoch.
var ErrFenced = errors.New("this replica no longer holds the instance's lease")

// Lease is one instance's lease as a replica holds it.
type Lease struct {
	Instance string
	Owner    string
	Epoch    int64
	// Address is where the holder's owner API answers ("" if unknown).
	Address string
}

// Fence is what a replica's write of an instance must still hold.
type Fence struct {
	Instance string
	Owner    string
	Epoch    int64
}

type fenceKey struct{}

// WithFence returns ctx carrying f: every write of f.Instance made with it
// (Import, RecordSync, AdvanceView, ResetView, Claim) checks f in its
// transaction, and a write of another instance is refused.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceOf returns the fence ctx carries, if any.
func FenceOf(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok
}

// checkFence runs inside a write's transaction, as its last statement: the
// lease row of instance must name the fence's owner and epoch and must not
// have expired. It locks the row until the transaction ends (PostgreSQL;
// SQLite has locked the file), so no takeover commits in between.
func (s *Store) checkFence(ctx context.Context, tx *sql.Tx, instance string) error {
	f, ok := FenceOf(ctx)
	if !ok {
		return nil
	}
	if f.Instance != instance {
		return fmt.Errorf("%w: the write is of %s, the fence of %s", ErrFenced, instance, f.Instance)
	}
	var epoch int64
	err := tx.QueryRowContext(ctx, s.d.bind(`SELECT epoch FROM leases WHERE instance = ? AND owner = ? AND epoch = ? AND expires_ms > `+s.d.nowMillis+s.d.lockRow),
		instance, f.Owner, f.Epoch).Scan(&epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w (%s, epoch %d)", ErrFenced, instance, f.Epoch)
	}
	return err
}

// AcquireLease takes instance's lease for owner for ttl, when it is free
// (never held, expired or released) or owner holds it already. It returns
// the lease's epoch and true, or false when another replica holds it. A
// lease owner still holds keeps its epoch (a renewal); a lease taken raises
// it, so nothing written under an earlier holding passes a fence.
//
// address is where owner's owner API answers, kept with the lease.
func (s *Store) AcquireLease(ctx context.Context, instance, owner, address string, ttl time.Duration) (int64, bool, error) {
	if !validInstance(instance) {
		return 0, false, refuse("instance", ErrInstanceName)
	}
	if owner == "" || ttl <= 0 {
		return 0, false, errors.New("store: acquire lease: an owner and a positive duration are needed")
	}
	now := s.d.nowMillis
	var epoch int64
	err := s.leaseDB.QueryRowContext(ctx, s.d.bind(`INSERT INTO leases (instance, owner, epoch, expires_ms, address) VALUES (?, ?, 1, `+now+` + ?, ?)
ON CONFLICT (instance) DO UPDATE SET
epoch = CASE WHEN leases.owner = excluded.owner AND leases.expires_ms > `+now+` THEN leases.epoch ELSE leases.epoch + 1 END,
owner = excluded.owner, expires_ms = excluded.expires_ms, address = excluded.address
WHERE leases.expires_ms <= `+now+` OR leases.owner = excluded.owner
RETURNING epoch`), instance, owner, ttl.Milliseconds(), address).Scan(&epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: acquire the lease of %s: %w", instance, err)
	}
	return epoch, true, nil
}

// RenewLeases extends, in one statement, every lease owner holds and that
// has not expired to ttl from now, and returns them: a lease owner had and
// that is missing here was lost.
func (s *Store) RenewLeases(ctx context.Context, owner string, ttl time.Duration) ([]Lease, error) {
	now := s.d.nowMillis
	rows, err := s.leaseDB.QueryContext(ctx, s.d.bind(`UPDATE leases SET expires_ms = `+now+` + ?
WHERE owner = ? AND expires_ms > `+now+` AND instance NOT LIKE '~%' RETURNING instance, epoch`), ttl.Milliseconds(), owner)
	if err != nil {
		return nil, fmt.Errorf("store: renew leases: %w", err)
	}
	return scanLeases(rows, owner)
}

// ReleaseLease gives up instance's lease if owner holds it under epoch: it
// expires at once, and the next replica to take it raises the epoch. The
// caller must have stopped writing for the instance.
func (s *Store) ReleaseLease(ctx context.Context, instance, owner string, epoch int64) error {
	if _, err := s.leaseDB.ExecContext(ctx, s.d.bind(`UPDATE leases SET expires_ms = 0 WHERE instance = ? AND owner = ? AND epoch = ?`),
		instance, owner, epoch); err != nil {
		return fmt.Errorf("store: release the lease of %s: %w", instance, err)
	}
	return nil
}

// HeldLeases lists the leases of instances that have not expired, of every
// replica.
func (s *Store) HeldLeases(ctx context.Context) ([]Lease, error) {
	rows, err := s.leaseDB.QueryContext(ctx, `SELECT instance, epoch, owner, address FROM leases WHERE expires_ms > `+s.d.nowMillis+` AND instance NOT LIKE '~%' ORDER BY instance`)
	if err != nil {
		return nil, fmt.Errorf("store: list leases: %w", err)
	}
	return scanLeases(rows, "")
}

// Holder returns the lease of instance if a replica holds it now.
func (s *Store) Holder(ctx context.Context, instance string) (Lease, bool, error) {
	l := Lease{Instance: instance}
	err := s.leaseDB.QueryRowContext(ctx, s.d.bind(`SELECT epoch, owner, address FROM leases WHERE instance = ? AND expires_ms > `+s.d.nowMillis), instance).
		Scan(&l.Epoch, &l.Owner, &l.Address)
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, false, nil
	}
	if err != nil {
		return Lease{}, false, fmt.Errorf("store: the lease of %s: %w", instance, err)
	}
	return l, true, nil
}

// scanLeases reads rows of instance, epoch and, when owner is "", owner and
// address.
func scanLeases(rows *sql.Rows, owner string) ([]Lease, error) {
	defer func() { _ = rows.Close() }()
	var out []Lease
	for rows.Next() {
		l := Lease{Owner: owner}
		dst := []any{&l.Instance, &l.Epoch}
		if owner == "" {
			dst = append(dst, &l.Owner, &l.Address)
		}
		if err := rows.Scan(dst...); err != nil {
			return nil, fmt.Errorf("store: leases: %w", err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: leases: %w", err)
	}
	return out, nil
}

// revokeLease ends instance's lease whoever holds it, raising its epoch, in
// tx: MarkRemoved calls it, so a replica that still serves a removed
// instance (its watch behind) stores nothing more under the name.
func (s *Store) revokeLease(ctx context.Context, tx *sql.Tx, instance string) error {
	_, err := tx.ExecContext(ctx, s.d.bind(`UPDATE leases SET epoch = epoch + 1, expires_ms = 0 WHERE instance = ?`), instance)
	return err
}

// execer is a *sql.DB or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// fenced runs a write of instance: when ctx carries no fence (one
// replica), straight on PostgreSQL or in SQLite's next group commit
// (writegroup.go), otherwise in a transaction that checks the fence after
// the write.
func (s *Store) fenced(ctx context.Context, instance string, write func(execer) error) error {
	if _, ok := FenceOf(ctx); !ok {
		if s.writes != nil {
			return s.groupedExec(ctx, write)
		}
		return write(s.db)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if err := write(tx); err != nil {
			return err
		}
		return s.checkFence(ctx, tx, instance)
	})
}

// Postgres tells whether the store is PostgreSQL, where several replicas of
// the core may share it.
func (s *Store) Postgres() bool { return s.d.name == postgresDialect.name }

// replicaRow prefixes the row each replica keeps in leases to say it is
// alive (Heartbeat): no plugin's name starts with '~'.
const replicaRow = "~replica:"

// Heartbeat says owner is alive for ttl: LiveReplicas counts it until then.
func (s *Store) Heartbeat(ctx context.Context, owner string, ttl time.Duration) error {
	now := s.d.nowMillis
	if _, err := s.leaseDB.ExecContext(ctx, s.d.bind(`INSERT INTO leases (instance, owner, epoch, expires_ms) VALUES (?, ?, 0, `+now+` + ?)
ON CONFLICT (instance) DO UPDATE SET expires_ms = excluded.expires_ms`), replicaRow+owner, owner, ttl.Milliseconds()); err != nil {
		return fmt.Errorf("store: heartbeat: %w", err)
	}
	return nil
}

// LiveReplicas counts the replicas whose heartbeat has not expired.
func (s *Store) LiveReplicas(ctx context.Context) (int, error) {
	var n int
	if err := s.leaseDB.QueryRowContext(ctx, s.d.bind(`SELECT COUNT(*) FROM leases WHERE instance LIKE ? AND expires_ms > `+s.d.nowMillis), replicaRow+"%").Scan(&n); err != nil {
		return 0, fmt.Errorf("store: live replicas: %w", err)
	}
	return n, nil
}

// Depart ends owner's heartbeat at once (a replica shutting down).
func (s *Store) Depart(ctx context.Context, owner string) error {
	if _, err := s.leaseDB.ExecContext(ctx, s.d.bind(`UPDATE leases SET expires_ms = 0 WHERE instance = ?`), replicaRow+owner); err != nil {
		return fmt.Errorf("store: depart: %w", err)
	}
	return nil
}
