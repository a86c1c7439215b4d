package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// An uninstalled plugin's data (OF-38). An instance is a Plugin's name and
// UID. The scheduler claims an instance in the store before its worker first
// calls it (claim in scheduler.go, through claimInstance here), and after
// every refresh of the Plugins the core marks removed each live instance of
// the store whose Plugin is gone or was replaced by another of the same name
// (markRemoved): its rows move to a key of their own, and a Plugin installed
// again under the name starts with nothing. The owner sees the removed instances in the status and may purge
// one (removedStatuses and servePurge, with the owner API's other handlers
// in server.go).

// markTimeout bounds one round of marking, which the Plugins watch waits for.
const markTimeout = time.Minute

// markRemoved is the Plugins watch's second callback, called after the
// scheduler's Update returned for the same list of Plugins, so no worker of
// an instance marked here can still store (Update stopped it and waited for
// its store in progress). uids holds every Plugin of the namespace, running
// or not, by name. For every live instance of the store: no Plugin of that
// name, or one with another UID, marks it removed; a Plugin of that name
// adopts an instance stored without UID, which waits for one otherwise. A Plugin that exists but does not
// run (revoked, waiting for approval) keeps its data under its name. An
// error is returned, after trying every instance, so the watch runs the
// round again later.
func (c *Core) markRemoved(ctx context.Context, uids map[string]string) error {
	if err := c.paused(); err != nil {
		return err // the watch runs the round again later
	}
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
		case li.UID == "":
			// Stored without UID and no Plugin of its name: a restored
			// record's instance (a restore clears the UIDs) waiting for its
			// plugin to be installed again, which then takes its data and
			// goes on from its watermark. Marking it removed here would set
			// the record aside the moment a restore came before the
			// installs (OF-55).
			continue
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
