package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/attention"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/platform"
)

// attentionOptions are `openfief status`'s flags.
type attentionOptions struct {
	env     *Env
	output  string
	coreURL string
}

// newAttentionCommand builds `openfief status`: what needs the owner's
// attention, one line each, most urgent first.
func newAttentionCommand(env *Env) *cobra.Command {
	o := &attentionOptions{env: env}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show what needs your attention: failing connectors, views behind, pending approvals, refused images",
		Long: `Show what needs your attention, one line each, most urgent first, each with
the command to run next:

  PlatformUnavailable  a platform Deployment is not Available
  CoreUnreachable      openfief-core did not answer: nothing is known of syncs
  SyncFailing          a connector's last sync failed
  SyncOverdue          no sync of a connector succeeded in twice its interval
  ExportFailing        a view's last export failed
  ExportOverdue        no export to a view succeeded in twice its interval
  ViewBehind           a view has entries it was not sent, and no export ended
                       in the last 15 minutes
  ImageRefused         the operator refused the image (Unsigned, UntrustedSigner,
                       ManifestMismatch, InvalidImage)
  ImageUnchecked       the registry could not be read, or refused the read
  PluginInvalid        the Plugin's spec or config, or its grant, is invalid
  ApprovalPending      the plugin waits for your approval (NoGrant,
                       AwaitingApproval, RunningPreviousVersion, ...)

It reads the Plugins, openfief-core's owner API (as 'openfief plugin status'
does: through the API server's service proxy, or --core-url /
$OPENFIEF_CORE_URL, with the owner's token) and the platform's Deployments
(as 'openfief platform status' does; skipped, saying so, when they cannot be
read). The dashboard shows the same list at the top of its page.

Exit codes: 0 when nothing needs attention, 13 when something does, and the
usual codes for errors (1 when the Plugins cannot be read). -o json or -o yaml
prints {"items": [...]} with the fields command, component, kind, lag,
message, plugin, reason and since.`,
		Example: `  openfief status
  openfief status -o json | jq -r '.items[].command'
  openfief status >/dev/null || echo "something needs attention"`,
		Args: exactArgs(0),
		RunE: runOptions(o),
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: json or yaml (default: one line each)")
	cmd.Flags().StringVar(&o.coreURL, "core-url", defaultCoreURL(), "read the sync status from the core's owner API at this URL instead of through the API server's service proxy: https, or http to a loopback address (default $"+EnvCoreURL+")")
	return cmd
}

// Complete has nothing to fill: status takes no argument.
func (o *attentionOptions) Complete([]string) error { return nil }

// Validate refuses an -o other than json or yaml.
func (o *attentionOptions) Validate() error { return checkOutput(o.output) }

// attentionReport is `openfief status -o json`'s document.
type attentionReport struct {
	// Items are what needs attention, most urgent first; never null.
	Items []attention.Item `json:"items"`
}

// Run reads the Plugins, the core and the platform, computes what needs
// attention and prints it; ExitAttention when anything does.
func (o *attentionOptions) Run(ctx context.Context) error {
	env := o.env
	c, err := env.Client()
	if err != nil {
		return err
	}
	var list v1alpha1.PluginList
	if err := c.List(ctx, &list, client.InNamespace(env.Namespace)); err != nil {
		return apiError("listing plugins", err)
	}
	in := attention.Input{
		Now: env.Now(), Plugins: list.Items,
		Commands: attention.Commands{Approve: env.ApproveCommand, Status: env.PluginStatusCommand, Platform: env.platformStatusCommand()},
	}
	api, err := env.coreAPI(o.coreURL, coreStatusTimeout)
	if err != nil {
		return err
	}
	if in.Core, err = api.statusAll(ctx); err != nil {
		in.CoreError = err.Error()
	} else {
		in.CoreRead = true
	}
	comps, err := env.platformComponents(ctx, c)
	if err != nil {
		fmt.Fprintf(env.ErrOut, "Note: the platform's Deployments were not checked: %s\n", display.Message(err.Error()))
	}
	in.Components = comps
	items := attention.Compute(in)
	if err := printAttention(env.Out, o.output, items); err != nil {
		return err
	}
	if len(items) > 0 {
		return &ExitError{Code: ExitAttention, Err: errAttention{n: len(items)}}
	}
	return nil
}

// errAttention is `openfief status`'s result when something needs
// attention: the list is the output, so Main prints no error line for it.
type errAttention struct{ n int }

func (errAttention) quiet() {}

func (e errAttention) Error() string {
	if e.n == 1 {
		return "1 thing needs your attention"
	}
	return fmt.Sprintf("%d things need your attention", e.n)
}

// platformComponents reads the platform's Deployments as `platform status`
// does; none, and no error, when the platform is not installed (the local
// mode runs it in one process).
func (e *Env) platformComponents(ctx context.Context, c client.Client) ([]attention.Component, error) {
	ctx, cancel := context.WithTimeout(ctx, platformStatusTimeout)
	defer cancel()
	st, err := platform.ReadStatus(ctx, c)
	if errors.Is(err, platform.ErrNotInstalled) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]attention.Component, 0, len(st.Components))
	for _, comp := range st.Components {
		out = append(out, attention.Component{Name: comp.Name, Available: comp.Available, Ready: comp.Ready})
	}
	return out, nil
}

// platformStatusTimeout bounds reading the platform's Deployments.
const platformStatusTimeout = 20 * time.Second

// PluginStatusCommand is the openfief command that shows the plugin name,
// with the --kubeconfig, --context and -n this command was given; `openfief
// status` and the dashboard's attention list name it.
func (e *Env) PluginStatusCommand(name string) string {
	return strings.Join(append([]string{"openfief", "plugin", "status", shellQuote(name)}, e.clusterArgs()...), " ")
}

// platformStatusCommand is `openfief platform status` with the
// --kubeconfig and --context this command was given.
func (e *Env) platformStatusCommand() string {
	return strings.Join(append([]string{"openfief", "platform", "status"}, e.clusterArgs()...), " ")
}

// printAttention writes items one a line (a table of what, which, details
// and the command to run), or as a document with -o.
func printAttention(w io.Writer, output string, items []attention.Item) error {
	if items == nil {
		items = []attention.Item{}
	}
	switch output {
	case outputJSON:
		b, err := json.MarshalIndent(attentionReport{Items: items}, "", "    ")
		if err != nil {
			return exitf(ExitFailure, "encoding json: %w", err)
		}
		_, err = w.Write(append(b, '\n'))
		return err
	case outputYAML:
		b, err := yaml.Marshal(attentionReport{Items: items})
		if err != nil {
			return exitf(ExitFailure, "encoding yaml: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	if len(items) == 0 {
		fmt.Fprintln(w, "Nothing needs your attention.")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tWHAT\tNEXT")
	for _, it := range items {
		name := it.Plugin
		if name == "" {
			name = it.Component
		}
		if name == "" {
			name = "-"
		}
		// Every field was escaped by attention.Compute; cell bounds the
		// name and keeps a tab out of the columns.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", it.Kind, cell(name), it.Message, it.Command)
	}
	return tw.Flush()
}
