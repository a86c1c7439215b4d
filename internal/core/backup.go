package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// Backup and restore through the owner API (docs/operations.md). A backup is
// streamed from one snapshot while the core works on; a restore stops the
// core's calls to plugins (syncs, file imports, exports, marking removed
// instances) for its duration, replaces the record in one transaction, and
// starts them again from the Plugins as they stand then, so connectors go
// on from the restored watermarks and views from the restored places.

// RecordStore is what backup and restore need of the store; *store.Store
// is it.
type RecordStore interface {
	Backup(ctx context.Context, w io.Writer, o store.BackupOptions) (store.BackupResult, error)
	Restore(ctx context.Context, r io.Reader, o store.RestoreOptions) (store.RestoreResult, error)
}

// ErrRestoring is wrapped by what the core refuses while a restore runs.
var ErrRestoring = errors.New("the core is restoring its record: try again once the restore has finished")

// ErrStopped is wrapped by what the core refuses after a final backup
// (?stop=true): it calls no plugin until it restarts or a restore.
var ErrStopped = errors.New("the core stopped calling plugins after a final backup: restart it, or restore a backup into it")

// gate holds the Plugins the watch reported last and whether the core
// applies them: not while a restore runs, nor after a final backup.
type gate struct {
	mu        sync.Mutex
	restoring bool
	stopped   bool
	targets   []Target
	seen      bool
}

// onPlugins is the Plugins watch's callback: the scheduler and the views
// take the running instances, unless the core is paused (then the list
// waits for resume).
func (c *Core) onPlugins(ts []Target) {
	c.gate.mu.Lock()
	defer c.gate.mu.Unlock()
	c.gate.targets, c.gate.seen = ts, true
	if !c.gate.restoring && !c.gate.stopped {
		c.applyTargets(ts)
	}
}

// applyTargets hands the running instances to the scheduler and the views,
// or, on several replicas, to the leases, which hand on those this replica
// holds (applyOwned). c.gate.mu is held.
func (c *Core) applyTargets(ts []Target) {
	if c.leases != nil {
		c.leases.Update(ts)
		return
	}
	c.sched.Update(ts)
	c.views.Update(ts)
}

// applyOwned is the leases' Apply: the running instances this replica
// holds, applied unless the core is paused (resume applies them then).
func (c *Core) applyOwned(owned []Target) {
	c.gate.mu.Lock()
	defer c.gate.mu.Unlock()
	if !c.gate.restoring && !c.gate.stopped {
		c.sched.Update(owned)
		c.views.Update(owned)
	}
}

// paused says why the core calls no plugin now, or nil.
func (c *Core) paused() error {
	c.gate.mu.Lock()
	defer c.gate.mu.Unlock()
	switch {
	case c.gate.restoring:
		return ErrRestoring
	case c.gate.stopped:
		return ErrStopped
	}
	return nil
}

// stopWorkers stops every worker and waits for them: no sync, import,
// export or sync record is in flight once it returns. c.gate.mu is held.
func (c *Core) stopWorkers() {
	c.sched.StopAll()
	c.views.Update(nil)
}

// pause stops the workers for a restore and reports whether the core was
// stopped already (a final backup). A second restore is refused.
func (c *Core) pause() (stopped bool, err error) {
	c.gate.mu.Lock()
	defer c.gate.mu.Unlock()
	if c.gate.restoring {
		return false, ErrRestoring
	}
	c.gate.restoring = true
	c.stopWorkers()
	return c.gate.stopped, nil
}

// stop stops the workers for good (a final backup): until the core
// restarts, or a restore resumes it.
func (c *Core) stop() {
	c.gate.mu.Lock()
	defer c.gate.mu.Unlock()
	c.gate.stopped = true
	c.stopWorkers()
}

// resume ends a restore: the core stays stopped when stopped (a refused
// restore into a core a final backup stopped), else it starts the workers
// again for the Plugins as the watch saw them last.
func (c *Core) resume(stopped bool) {
	c.gate.mu.Lock()
	defer c.gate.mu.Unlock()
	c.gate.restoring, c.gate.stopped = false, stopped
	if !stopped && c.gate.seen {
		c.applyTargets(c.gate.targets)
	}
}

// serveBackup streams a backup of the record. With ?stop=true it is a
// final backup: the core first stops calling plugins, and stays stopped, so
// that the backup is the last state of its record (a move to a new
// database or cluster, where nothing may happen after the snapshot).
func (c *Core) serveBackup(w http.ResponseWriter, r *http.Request) {
	rs, ok := c.store.(RecordStore)
	if !ok {
		writeError(w, http.StatusNotImplemented, errors.New("this core's store cannot be backed up"))
		return
	}
	if r.URL.Query().Get("stop") == "true" {
		c.stop()
		c.log.Info("a final backup: calls to plugins stopped until the core restarts or a restore")
	}
	cw := &countingWriter{w: w, header: func() {
		w.Header().Set("Content-Type", ownerapi.BackupMediaType)
		w.Header().Set("Content-Disposition", `attachment; filename="openfief-core.backup.gz"`)
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
	}}
	start := time.Now()
	res, err := rs.Backup(r.Context(), cw, store.BackupOptions{Core: coreVersion()})
	if err != nil {
		c.log.Error("backup failed", "error", err.Error(), "bytes", cw.n)
		if cw.n == 0 {
			writeError(w, http.StatusServiceUnavailable, err)
			return
		}
		// The owner receives a backup without its trailer, which no
		// restore takes: abort rather than end the stream.
		panic(http.ErrAbortHandler)
	}
	var rows int64
	for _, n := range res.Rows {
		rows += n
	}
	c.log.Info("backed up the record", "rows", rows, "bytes", cw.n, "sha256", res.SHA256, "took", time.Since(start).String())
}

// countingWriter writes the answer's header before the first byte and
// counts the bytes.
type countingWriter struct {
	w      io.Writer
	header func()
	n      int64
}

func (cw *countingWriter) Write(p []byte) (int, error) {
	if cw.n == 0 && len(p) > 0 {
		cw.header()
	}
	n, err := cw.w.Write(p)
	cw.n += int64(n)
	return n, err
}

// serveRestore restores the backup in the body: all of it or nothing.
func (c *Core) serveRestore(w http.ResponseWriter, r *http.Request) {
	rs, ok := c.store.(RecordStore)
	if !ok {
		writeError(w, http.StatusNotImplemented, errors.New("this core's store cannot be restored"))
		return
	}
	if err := c.onlyReplica(r.Context()); err != nil {
		writeError(w, http.StatusConflict, err)
		c.log.Warn("restore refused: nothing changed", "error", err.Error())
		return
	}
	stopped, err := c.pause()
	if err != nil {
		writeError(w, http.StatusConflict, err)
		return
	}
	// A refused restore leaves the core as it was, stopped or calling
	// plugins; a restore made resumes it.
	defer func() { c.resume(stopped) }()
	c.log.Info("restoring the record: calls to plugins stopped")
	body := http.MaxBytesReader(w, r.Body, ownerapi.MaxRestoreBytes)
	res, err := rs.Restore(r.Context(), body, store.RestoreOptions{
		Replace: r.URL.Query().Get("replace") == "true",
		// Plugins installed again have new UIDs: those of the names in
		// the record adopt its data. And no entry number the old core may
		// have handed out after the snapshot is handed out again.
		Adopt: true, NewNumbers: true,
	})
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("the backup is larger than %d bytes: nothing restored", ownerapi.MaxRestoreBytes))
		case errors.Is(err, store.ErrRecordNotEmpty):
			writeError(w, http.StatusConflict, err)
		case errors.Is(err, store.ErrNewerSchema):
			writeError(w, http.StatusUnprocessableEntity, err)
		case errors.Is(err, store.ErrDamagedBackup):
			writeError(w, http.StatusBadRequest, err)
		default:
			writeError(w, http.StatusServiceUnavailable, err)
		}
		c.log.Warn("restore refused: nothing changed", "error", err.Error())
		return
	}
	out := ownerapi.RestoreResponse{
		Schema: res.Header.SchemaVersion(), Database: res.Header.Database, Core: res.Header.Core, Time: res.Header.Time,
		Rows: res.Rows, Replaced: res.Replaced,
	}
	for _, n := range res.Rows {
		out.RowsTotal += n
	}
	stopped = false
	c.log.Info("restored the record: calling plugins again", "rows", out.RowsTotal, "schema", out.Schema, "taken", out.Time.Format(time.RFC3339))
	writeJSON(w, http.StatusOK, out)
}

// coreVersion is this binary's version as the Go toolchain recorded it,
// for a backup's header.
func coreVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " (" + s.Value[:12] + ")"
		}
	}
	return v
}

// onlyReplica refuses a restore while other replicas of the core run on the
// same database: a restore pauses only the replica it reaches, and the
// others would go on calling plugins and storing while the record is
// replaced. A core without leases (SQLite) is always the only one.
func (c *Core) onlyReplica(ctx context.Context) error {
	if c.leases == nil {
		return nil
	}
	n, err := c.leases.o.Store.LiveReplicas(ctx)
	if err != nil {
		return fmt.Errorf("cannot tell whether other replicas of the core run, so nothing was restored: %w", err)
	}
	if n > 1 {
		return fmt.Errorf("%d replicas of the core run on this database: a restore needs exactly one, or the others would store while the record is replaced; scale the core to one replica (kubectl -n %s scale deployment openfief-core --replicas=1), restore, then scale it back: nothing was restored", n, plugins.Namespace)
	}
	return nil
}
