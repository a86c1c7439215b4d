package store

import "context"

// SQLite lets one transaction write at a time, and every transaction of this
// store takes the write lock as it begins (_txlock=immediate). Left to
// SQLite, the writers waiting for the lock each hold one of the pool's
// connections and poll for the lock, sleeping between tries up to 100 ms
// (its busy handler): under a steady load of many connectors' syncs the
// lock then sits idle between a commit and the next try, and the waiting
// writers take every connection, so reads (a sync's watermark) wait behind
// them. writeTurn queues this process's writers instead, in the order they
// came, before they take a connection: the lock passes on as soon as a
// writer commits, and the other connections stay free for reads. Another
// process writing the same file still meets the busy handler.

// newWriteTurn returns the queue of a SQLite store's writers; PostgreSQL
// locks rows, not the database, and has none.
func newWriteTurn() chan struct{} { return make(chan struct{}, 1) }

// writeTurn waits for this process's turn to write the SQLite file and
// returns the function that ends it; on PostgreSQL it returns at once.
func (s *Store) writeTurn(ctx context.Context) (done func(), err error) {
	if s.writes == nil {
		return func() {}, nil
	}
	select {
	case s.writes <- struct{}{}:
		return func() { <-s.writes }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
