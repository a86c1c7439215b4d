package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// On SQLite every commit syncs the write-ahead log to disk, which costs a
// disk flush whatever the transaction wrote: with many connectors, one
// flush per import and one per sync's record bound how many syncs a second
// the store takes. The writes of a SQLite store are therefore committed in
// groups: a writer that finds no group being committed starts one, on a
// goroutine of its own, which commits every write queued by then in one
// transaction; writers arriving meanwhile queue for the next group. Each
// write runs inside a savepoint of its own, so one that fails is rolled
// back alone and fails only its caller; each caller returns once the
// group holding its write committed (or failed to), exactly as it would
// alone. The statements of a group run under the group's context, never a
// caller's: an interrupted statement would end SQLite's whole transaction
// under the others. A caller whose context ended before its write ran is
// told so and nothing of it is written.

// groupCommitTimeout bounds a group's wait for its turn to write and its
// transaction.
const groupCommitTimeout = time.Minute

// errGroupClosed is what a write queued behind a failed group's
// transaction is told.
var errGroupClosed = errors.New("the transaction of the write's group failed")

// writeGroups queues the writes of the next group.
type writeGroups struct {
	mu      sync.Mutex
	queue   []*groupedWrite
	leading bool
	// queued counts the writes ever queued, for the tests.
	queued int
}

// groupedWrite is one caller's write and where its outcome goes.
type groupedWrite struct {
	// caller is the caller's context: the write is skipped once it ended.
	caller context.Context
	write  func(ctx context.Context, tx *sql.Tx) error
	done   chan error
}

// grouped runs write in the next group commit of this SQLite store and
// returns its outcome once the group committed. write gets the group's
// context and transaction.
func (s *Store) grouped(ctx context.Context, write func(ctx context.Context, tx *sql.Tx) error) error {
	w := &groupedWrite{caller: ctx, write: write, done: make(chan error, 1)}
	g := &s.groups
	g.mu.Lock()
	g.queue = append(g.queue, w)
	g.queued++
	lead := !g.leading
	g.leading = true
	g.mu.Unlock()
	if lead {
		go s.commitGroups()
	}
	return <-w.done
}

// writeTx runs write in one transaction: on SQLite in the next group
// commit, under the group's context with the caller's fence; on PostgreSQL
// in a transaction of its own under ctx.
func (s *Store) writeTx(ctx context.Context, write func(ctx context.Context, tx *sql.Tx) error) error {
	if s.writes == nil {
		return s.inTx(ctx, func(tx *sql.Tx) error { return write(ctx, tx) })
	}
	return s.grouped(ctx, func(gctx context.Context, tx *sql.Tx) error {
		if f, ok := FenceOf(ctx); ok {
			gctx = WithFence(gctx, f)
		}
		return write(gctx, tx)
	})
}

// groupedExec is grouped for a single statement's write (fenced).
func (s *Store) groupedExec(ctx context.Context, write func(execer) error) error {
	return s.grouped(ctx, func(gctx context.Context, tx *sql.Tx) error {
		return write(groupExecer{tx: tx, ctx: gctx})
	})
}

// groupExecer runs a write's statement under its group's context.
type groupExecer struct {
	tx  *sql.Tx
	ctx context.Context
}

func (e groupExecer) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	return e.tx.ExecContext(e.ctx, query, args...)
}

// commitGroups commits the queued groups until none is left.
func (s *Store) commitGroups() {
	g := &s.groups
	for {
		g.mu.Lock()
		batch := g.queue
		g.queue = nil
		if len(batch) == 0 {
			g.leading = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		s.commitGroup(batch)
	}
}

// commitGroup runs the writes of batch in one transaction, each in a
// savepoint, and tells each its outcome once the transaction ended.
func (s *Store) commitGroup(batch []*groupedWrite) {
	ctx, cancel := context.WithTimeout(context.Background(), groupCommitTimeout)
	defer cancel()
	outcome := make([]error, len(batch))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for i, w := range batch {
			if err := w.caller.Err(); err != nil {
				outcome[i] = err
				continue
			}
			if _, err := tx.ExecContext(ctx, `SAVEPOINT grouped`); err != nil {
				return err
			}
			if outcome[i] = w.write(ctx, tx); outcome[i] != nil {
				if _, err := tx.ExecContext(ctx, `ROLLBACK TO grouped`); err != nil {
					return err
				}
			}
			if _, err := tx.ExecContext(ctx, `RELEASE grouped`); err != nil {
				return err
			}
		}
		return nil
	})
	for i, w := range batch {
		switch {
		case outcome[i] != nil:
			w.done <- outcome[i]
		case err != nil:
			w.done <- fmt.Errorf("%w: %w", errGroupClosed, err)
		default:
			w.done <- nil
		}
	}
}
