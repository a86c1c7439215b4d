package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/core/store"
)

// An uninstalled plugin's data (OF-38). An instance is a Plugin's name and
// UID. The scheduler claims an instance in the store before its worker first
// calls it (claim), and after every refresh of the Plugins the core marks
// removed each live instance of the store whose Plugin is gone or was
// replaced by another of the same name (markRemoved): its rows move to a key
// of their own, and a Plugin installed again under the name starts with
// nothing. The owner sees the removed instances in the status and may purge
// one (servePurge).

// markTimeout bounds one round of marking, which the Plugins watch waits for.
const markTimeout = time.Minute

// markRemoved is the Plugins watch's second callback, called after the
// scheduler's Update returned for the same list of Plugins, so no worker of
// an instance marked here can still store (Update stopped it and waited for
// its store in progress). uids holds every Plugin of the namespace, running
// or not, by name. For every live instance of the store: no Plugin of that
// name, or one with another UID, marks it removed; a Plugin of that name
// adopts an instance stored without UID. A Plugin that exists but does not
// run (revoked, waiting for approval) keeps its data under its name. An
// error is returned, after trying every instance, so the watch runs the
// round again later.
func (c *Core) markRemoved(ctx context.Context, uids map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, markTimeout)
	defer cancel()
	live, err := c.store.LiveInstances(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, li := range live {
		uid, exists := uids[li.Name]
		now := c.sched.o.Clock.Now()
		switch {
		case exists && uid == li.UID:
			continue
		case exists && li.UID == "":
			if uid == "" {
				continue
			}
			_, err = c.store.Claim(ctx, li.Name, uid, now)
		default:
			var key string
			key, err = c.store.MarkRemoved(ctx, li.Name, li.UID, now)
			if err == nil && key != "" {
				c.log.Info("the plugin is uninstalled: its data is kept, marked removed", "plugin", li.Name, "instance", key)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", li.Name, err))
		}
	}
	return errors.Join(errs...)
}

// claim makes the worker's instance the store's live instance of its name
// before the worker's first call (store.Claim): data stored for an earlier
// Plugin of the same name is marked removed first. It waits for the Update
// that started the worker, which stops an earlier worker of the name and
// waits for its store in progress. A failing store is retried with backoff
// until it answers or the worker stops; false means the worker stopped.
func (s *Scheduler) claim(ctx context.Context, instance string, w *worker) bool {
	s.updating.Lock()
	//nolint:staticcheck // empty on purpose: the Update that started this worker has returned
	s.updating.Unlock()
	if !claimInstance(ctx, s.o.Store, s.o.Clock, s.o.Log, s.o.Backoff, s.o.MaxBackoff, instance, w.getTarget().UID) {
		return false
	}
	close(w.claimed)
	return true
}

// claimInstance claims instance for uid in st (store.Claim), retrying a
// failing store with backoff until it answers; false means ctx ended first.
// An empty uid claims nothing.
func claimInstance(ctx context.Context, st Store, clk Clock, log *slog.Logger, backoff, maxBackoff time.Duration, instance, uid string) bool {
	wait := backoff
	for uid != "" {
		key, err := st.Claim(ctx, instance, uid, clk.Now())
		if err == nil {
			if key != "" {
				log.Info("a new plugin of an earlier one's name: the earlier one's data is kept, marked removed", "plugin", instance, "instance", key)
			}
			return true
		}
		log.Error("claiming the plugin's instance in the store; retrying", "plugin", instance, "in", wait.String(), "error", err.Error())
		select {
		case <-ctx.Done():
			return false
		case <-clk.After(wait):
		}
		wait = min(2*wait, maxBackoff)
	}
	return true
}

// removedStatuses are the removed instances' statuses, sorted by name and
// removal.
func (c *Core) removedStatuses(r *http.Request) ([]ownerapi.InstanceStatus, error) {
	removed, err := c.store.RemovedInstances(r.Context())
	if err != nil {
		return nil, err
	}
	out := make([]ownerapi.InstanceStatus, 0, len(removed))
	for _, ri := range removed {
		st, err := c.store.Status(r.Context(), ri.Key)
		if errors.Is(err, store.ErrUnknownInstance) {
			continue // purged meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, ownerStatus(ri.Key, st))
	}
	return out, nil
}

// validKey checks a path's instance key: a Plugin name or a removed key.
func validKey(key string) error {
	if _, _, ok := store.SplitKey(key); !ok {
		return fmt.Errorf("instance: %w", store.ErrKey)
	}
	return nil
}

// servePurge deletes a removed instance's data, or with ?mode=preview
// counts what a purge would delete. A live instance is refused (409): its
// Plugin must be uninstalled first.
func (c *Core) servePurge(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("name")
	if err := validKey(key); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	preview := r.URL.Query().Get("mode") == "preview"
	n, err := c.store.Purge(r.Context(), key, preview)
	var ve *store.ValidationError
	switch {
	case errors.Is(err, store.ErrLive):
		writeError(w, http.StatusConflict, fmt.Errorf("%s: %w", key, err))
		return
	case errors.Is(err, store.ErrUnknownInstance):
		writeError(w, http.StatusNotFound, err)
		return
	case errors.As(err, &ve):
		writeError(w, http.StatusBadRequest, err)
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	if !preview {
		c.log.Info("purged a removed instance's data", "instance", key, "rows", n.Total())
	}
	rc := n.Rows
	writeJSON(w, http.StatusOK, ownerapi.PurgeResponse{
		Instance: key, Preview: preview, ViewPlaces: n.ViewPlaces, RowsTotal: n.Total(),
		Rows: ownerapi.RowCounts{
			Batches: rc.Batches, Transactions: rc.Transactions, Postings: rc.Postings, Balances: rc.Balances,
			Prices: rc.Prices, FxRates: rc.FxRates, IndexReadings: rc.IndexReadings, Problems: rc.Problems,
		},
	})
}
