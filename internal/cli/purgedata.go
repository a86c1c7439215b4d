package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/display"
)

// The data an uninstalled plugin left in openfief-core. When a Plugin is
// deleted, the core keeps what it stored for it under a key of its own
// (name~tag) and marks it removed; a new Plugin of the same name starts with
// nothing. `uninstall --purge-data` waits for that mark and purges the data;
// `purge-data KEY` purges an older removed instance's data.

// DefaultPurgeDataWait bounds the wait for the core to mark an uninstalled
// plugin's data removed.
const DefaultPurgeDataWait = time.Minute

// purgeTimeout bounds one purge request (a large instance takes a while).
const purgeTimeout = 2 * time.Minute

// maxKey bounds a removed instance's key: a name (253), '~' and a tag (64).
const maxKey = 253 + 1 + 64

// checkKey refuses a key that is no instance key before it goes into a URL
// path; the core checks the rest of the rule.
func checkKey(key string) error {
	if key == "" || len(key) > maxKey {
		return exitf(ExitUsage, "KEY %q: want a removed instance's key such as nbp-fx~0a1b2c3d (at most %d characters)", display.Text(key), maxKey)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '~') {
			return exitf(ExitUsage, "KEY %q: only lower-case letters, digits, '-', '.' and '~'", display.Text(key))
		}
	}
	return nil
}

// statusAll reads every instance's status, removed ones included.
func (c *coreAPI) statusAll(ctx context.Context) ([]ownerapi.InstanceStatus, error) {
	var out []ownerapi.InstanceStatus
	err := c.do(ctx, http.MethodGet, ownerapi.PathStatus, nil, nil, &out)
	return out, err
}

// purge deletes a removed instance's data, or previews it.
func (c *coreAPI) purge(ctx context.Context, key string, preview bool) (ownerapi.PurgeResponse, error) {
	var out ownerapi.PurgeResponse
	err := c.do(ctx, http.MethodPost, ownerapi.PurgePath(key, preview), nil, nil, &out)
	return out, err
}

// removedOf lists the removed instances of the Plugin name.
func removedOf(all []ownerapi.InstanceStatus, name string) []ownerapi.InstanceStatus {
	var out []ownerapi.InstanceStatus
	for _, s := range all {
		if s.Removed && s.Plugin == name {
			out = append(out, s)
		}
	}
	return out
}

// printRemoved lists removed instances' data, one a line.
func printRemoved(w io.Writer, removed []ownerapi.InstanceStatus) {
	for _, s := range removed {
		when := "at an unknown time"
		if s.RemovedAt != nil {
			when = s.RemovedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "  %s  plugin %s, removed %s, %d rows\n", display.Text(s.Instance), display.Text(s.Plugin), when, s.RowsTotal)
	}
}

// printPurge lists a purge's (or preview's) rows by table.
func printPurge(w io.Writer, p ownerapi.PurgeResponse) {
	r := p.Rows
	for _, row := range []struct {
		table string
		n     int
	}{
		{"batches", r.Batches}, {"transactions", r.Transactions}, {"postings", r.Postings},
		{"balance assertions", r.Balances}, {"prices", r.Prices}, {"FX rates", r.FxRates},
		{"index readings", r.IndexReadings}, {"problems", r.Problems}, {"view places", p.ViewPlaces},
	} {
		fmt.Fprintf(w, "  %-19s %d\n", row.table, row.n)
	}
	fmt.Fprintf(w, "  %-19s %d\n", "total", p.RowsTotal)
}

// purgeData shows what purging key deletes, asks unless yes, and purges.
func (e *Env) purgeData(ctx context.Context, api *coreAPI, key string, yes bool) error {
	preview, err := api.purge(ctx, key, true)
	if err != nil {
		return purgeError(key, err)
	}
	fmt.Fprintf(e.Out, "The data openfief-core keeps as %s, which a purge deletes:\n", display.Text(key))
	printPurge(e.Out, preview)
	if err := e.confirm(ctx, yes, fmt.Sprintf("Delete the data of %s for good?", display.Text(key)), "purging the data of "+display.Text(key)); err != nil {
		return err
	}
	done, err := api.purge(ctx, key, false)
	if err != nil {
		return purgeError(key, err)
	}
	fmt.Fprintf(e.Out, "purged the data of %s: %d rows deleted\n", display.Text(key), done.RowsTotal)
	return nil
}

// purgeError turns the core's refusals into exit codes: a live instance is
// a usage error (uninstall first), an unknown key not found.
func purgeError(key string, err error) error {
	var ce *errCoreStatus
	if errors.As(err, &ce) && ce.fromCore && !ce.refusedOwner() {
		switch ce.code {
		case http.StatusConflict:
			return exitf(ExitUsage, "%s is a plugin that is still installed: only an uninstalled plugin's data can be purged ('openfief plugin uninstall %s --purge-data'): %w", display.Text(key), display.Text(key), err)
		case http.StatusNotFound:
			return exitf(ExitNotFound, "openfief-core keeps no data as %s: %w", display.Text(key), err)
		case http.StatusBadRequest:
			return exitf(ExitUsage, "%s: %w", display.Text(key), err)
		}
	}
	return exitf(ExitFailure, "purging the data of %s: %w", display.Text(key), err)
}

// waitRemoved polls the core until it has marked the data of the Plugin
// name with uid removed, saying so on w every few seconds, and returns the
// key its data is kept under.
func waitRemoved(ctx context.Context, w io.Writer, api *coreAPI, name, uid string, within time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	start := time.Now()
	fmt.Fprintf(w, "waiting up to %s for openfief-core to mark the data of plugin %s removed...\n", within, name)
	lastSaid := start
	for {
		all, err := api.statusAll(ctx)
		if err == nil {
			for _, s := range removedOf(all, name) {
				if s.UID == uid {
					return s.Instance, nil
				}
			}
		}
		if time.Since(lastSaid) >= 5*time.Second {
			lastSaid = time.Now()
			fmt.Fprintf(w, "  still waiting (%s)\n", time.Since(start).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("openfief-core did not mark the data of plugin %s removed within %s", name, within)
			if err != nil {
				msg += ": " + display.Message(err.Error())
			}
			return "", exitf(ExitFailure, "%s; the plugin is uninstalled and its data kept: purge it later with 'openfief plugin purge-data' (it lists the keys)", msg)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// coreData asks the core, before an uninstall, whether it holds data of the
// Plugin name under its name.
func (e *Env) coreData(ctx context.Context, coreURL, name string) (*coreAPI, bool, error) {
	api, err := e.coreAPI(coreURL, purgeTimeout)
	if err != nil {
		return nil, false, err
	}
	all, err := api.statusAll(ctx)
	if err != nil {
		return nil, false, exitf(ExitFailure, "--purge-data: reading the core's status, before deleting anything: %w", err)
	}
	for _, s := range all {
		if !s.Removed && s.Instance == name {
			return api, true, nil
		}
	}
	return api, false, nil
}

// purgeUninstalled is the end of `uninstall --purge-data`: it waits for the
// core to mark the deleted Plugin's data removed, then purges it.
func (e *Env) purgeUninstalled(ctx context.Context, api *coreAPI, p *v1alpha1.Plugin, name string, hasData bool, within time.Duration, yes bool) error {
	if p == nil || !hasData {
		fmt.Fprintf(e.Out, "openfief-core holds no data of plugin %s under its name; 'openfief plugin purge-data' lists what it keeps of earlier ones\n", name)
		return nil
	}
	key, err := waitRemoved(ctx, e.Out, api, name, string(p.UID), within)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Out, "openfief-core marked the data of plugin %s removed: it is kept as %s\n", name, display.Text(key))
	return e.purgeData(ctx, api, key, yes)
}

// printRemovedData lists what the core keeps of uninstalled plugins named
// name, if anything; a core that does not answer adds nothing (the status
// says so already, or the plugin is not found anyway).
func (e *Env) printRemovedData(ctx context.Context, api *coreAPI, coreURL, name string) {
	if api == nil {
		var err error
		if api, err = e.coreAPI(coreURL, coreStatusTimeout); err != nil {
			return
		}
	}
	all, err := api.statusAll(ctx)
	if err != nil {
		return
	}
	removed := removedOf(all, name)
	if len(removed) == 0 {
		return
	}
	fmt.Fprintf(e.Out, "Removed data (kept by openfief-core from uninstalled plugins named %s; 'openfief plugin purge-data KEY' deletes it):\n", name)
	printRemoved(e.Out, removed)
}

// purgeDataOptions are `openfief plugin purge-data`'s flags and argument.
type purgeDataOptions struct {
	env     *Env
	coreURL string
	yes     bool

	// key is the argument KEY; without it (hasKey false) the command lists.
	key    string
	hasKey bool
}

// newPurgeDataCommand builds `openfief plugin purge-data`.
func newPurgeDataCommand(env *Env) *cobra.Command {
	o := &purgeDataOptions{env: env}
	cmd := &cobra.Command{
		Use:   "purge-data [KEY] [--yes]",
		Short: "List or delete the data openfief-core keeps of uninstalled plugins",
		Long: `When a plugin is uninstalled, openfief-core keeps the data it stored for it
(transactions, balances, prices, FX rates, index readings, problems, a view's
places) under a key of its own, NAME~TAG, and marks it removed: a plugin
installed again under the same name starts with nothing, and the old data stays
readable until you purge it.

Without KEY, lists the removed plugins' data with their keys. With KEY, shows
how many rows of each table a purge deletes, asks (unless --yes), and deletes
exactly that data. The data of an installed plugin is never purged: uninstall
it first ('openfief plugin uninstall NAME --purge-data' does both).

The core is reached through the API server's service proxy, or --core-url /
$OPENFIEF_CORE_URL, with the owner's token.`,
		Example: `  openfief plugin purge-data
  openfief plugin purge-data nbp-fx~0a1b2c3d
  openfief plugin purge-data nbp-fx~0a1b2c3d --yes`,
		Args: cobra.MaximumNArgs(1),
		RunE: runOptions(o),
	}
	cmd.Flags().StringVar(&o.coreURL, "core-url", defaultCoreURL(), "call the core's owner API at this URL instead of through the API server's service proxy: https, or http to a loopback address (default $"+EnvCoreURL+")")
	cmd.Flags().BoolVarP(&o.yes, "yes", "y", false, "purge without asking")
	return cmd
}

// Complete takes KEY, if given.
func (o *purgeDataOptions) Complete(args []string) error {
	if len(args) == 1 {
		o.key, o.hasKey = args[0], true
	}
	return nil
}

// Validate refuses a KEY that is no instance key.
func (o *purgeDataOptions) Validate() error {
	if o.hasKey {
		return checkKey(o.key)
	}
	return nil
}

// Run purges KEY's data or, without KEY, lists the data the core keeps of
// uninstalled plugins.
func (o *purgeDataOptions) Run(ctx context.Context) error {
	env := o.env
	api, err := env.coreAPI(o.coreURL, purgeTimeout)
	if err != nil {
		return err
	}
	if o.hasKey {
		return env.purgeData(ctx, api, o.key, o.yes)
	}
	all, err := api.statusAll(ctx)
	if err != nil {
		return exitf(ExitFailure, "reading the core's status: %w", err)
	}
	var removed []ownerapi.InstanceStatus
	for _, s := range all {
		if s.Removed {
			removed = append(removed, s)
		}
	}
	if len(removed) == 0 {
		fmt.Fprintln(env.Out, "openfief-core keeps no data of uninstalled plugins")
		return nil
	}
	fmt.Fprintln(env.Out, "Data of uninstalled plugins (KEY, plugin, when removed, rows):")
	printRemoved(env.Out, removed)
	fmt.Fprintln(env.Out, "Purge one with 'openfief plugin purge-data KEY'.")
	return nil
}
