package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/display"
)

// historyOptions are `openfief plugin history`'s flags and argument.
type historyOptions struct {
	env    *Env
	output string

	// name is the argument NAME.
	name string
}

// newHistoryCommand builds `openfief plugin history`: the revisions the
// operator recorded in status.history, newest first.
func newHistoryCommand(env *Env) *cobra.Command {
	o := &historyOptions{env: env}
	cmd := &cobra.Command{
		Use:   "history NAME",
		Short: "List the versions a plugin ran, newest first, to roll back to",
		Long: `List the revisions of the Plugin NAME that the operator verified and ran
(status.history), newest first; it keeps the last ` + strconv.Itoa(v1alpha1.MaxPluginHistory) + `:

  REVISION   the revision's number; 'openfief plugin rollback NAME --to REVISION'
  IMAGE      its image, the digest shortened to 12 hex digits
  SIGNATURE  how it verified when it started: Verified or SignedByTrustedSigner, and the signer
  FIRST RAN  when it started
  LAST RAN   when another revision replaced it; "running" for the one that runs

A new revision is recorded when another image starts running, also for a
rollback (with the older image and a new number); a change of config alone
records none. -o json or -o yaml prints {"name", "running", "items": [...]}
with each revision's fields (revision, image, manifestDigest, signer, trust,
firstRan, lastRan) and whether it runs.`,
		Example: `  openfief plugin history nbp-fx
  openfief plugin history nbp-fx -o json | jq -r '.items[1].image'`,
		Args: exactArgs(1),
		RunE: runOptions(o),
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: json or yaml (default: a table)")
	return cmd
}

// Complete takes NAME.
func (o *historyOptions) Complete(args []string) error {
	o.name = args[0]
	return nil
}

// Validate refuses an -o other than json or yaml.
func (o *historyOptions) Validate() error { return checkOutput(o.output) }

// Run reads the Plugin and prints its history.
func (o *historyOptions) Run(ctx context.Context) error {
	env := o.env
	c, err := env.Client()
	if err != nil {
		return err
	}
	p, err := env.getPlugin(ctx, c, o.name)
	if err != nil {
		return err
	}
	report := historyOf(p)
	if o.output != outputTable {
		return printObject(env.Out, o.output, report)
	}
	if len(report.Items) == 0 {
		fmt.Fprintf(env.ErrOut, "No revisions of plugin %s yet: none of its versions has run.\n", p.Name)
		return nil
	}
	return printHistory(env.Out, env.Now(), report)
}

// historyReport is `openfief plugin history -o json`'s document.
type historyReport struct {
	// Name is the plugin's.
	Name string `json:"name"`
	// Running is the image that runs (status.deployed), "" when none does.
	Running string `json:"running"`
	// Items are the revisions, newest first; never null.
	Items []historyItem `json:"items"`
}

// historyItem is one revision and whether it is the one that runs.
type historyItem struct {
	v1alpha1.PluginRevision
	// Running is true for the newest revision while its image runs.
	Running bool `json:"running"`
}

// historyOf is the report of p's status.history, at most
// v1alpha1.MaxPluginHistory revisions, as stored (newest first).
func historyOf(p *v1alpha1.Plugin) historyReport {
	r := historyReport{Name: p.Name, Items: []historyItem{}}
	if d := p.Status.Deployed; d != nil {
		r.Running = d.Image
	}
	h := p.Status.History
	if len(h) > v1alpha1.MaxPluginHistory {
		h = h[:v1alpha1.MaxPluginHistory]
	}
	for i, rev := range h {
		r.Items = append(r.Items, historyItem{PluginRevision: rev, Running: i == 0 && r.Running != "" && rev.Image == r.Running})
	}
	return r
}

// printHistory writes the history table; every value the operator (or
// anyone who may write plugins/status) wrote is escaped and bounded.
func printHistory(w io.Writer, now time.Time, r historyReport) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tIMAGE\tSIGNATURE\tFIRST RAN\tLAST RAN")
	for _, it := range r.Items {
		last := "-"
		switch {
		case it.Running:
			last = "running"
		case it.LastRan != nil:
			last = ranAt(now, it.LastRan.Time)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", it.Revision, shortImage(it.Image), cell(signatureOf(it.PluginRevision)), ranAt(now, it.FirstRan.Time), last)
	}
	return tw.Flush()
}

// signatureOf reads "SignedByTrustedSigner by owner", or "-".
func signatureOf(r v1alpha1.PluginRevision) string {
	var parts []string
	if r.Trust != "" {
		parts = append(parts, r.Trust)
	}
	if r.Signer != "" {
		parts = append(parts, "by "+r.Signer)
	}
	return orDash(strings.Join(parts, " "))
}

// ranAt reads "2026-12-06T09:00:00Z (3h ago)", or "-" for no time.
func ranAt(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339) + " (" + display.Age(now, t) + " ago)"
}
