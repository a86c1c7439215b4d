package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// Output formats of -o.
const (
	outputTable = ""
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// checkOutput refuses an unknown -o value.
func checkOutput(o string) error {
	switch o {
	case outputTable, outputJSON, outputYAML:
		return nil
	}
	return usageError(fmt.Errorf("-o %q: want json or yaml (or none for the table)", o))
}

// listOptions are `openfief plugin list`'s flags.
type listOptions struct {
	env    *Env
	output string
}

// newListCommand builds `openfief plugin list`: a table like `kubectl get`.
func newListCommand(env *Env) *cobra.Command {
	o := &listOptions{env: env}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the installed plugins and how they run",
		Long: `List the Plugins in the namespace, sorted by name:

  NAME       the instance
  READY      the Ready condition: True when a version runs
  REASON     why: Running, RunningPreviousVersion, NoGrant, AwaitingApproval, ...
  SIGNATURE  the SignatureVerified reason: Verified (catalog), SignedByTrustedSigner,
             or why not (Unsigned, UntrustedSigner, ManifestMismatch, ...)
  APPROVAL   the ApprovalRequired reason: PermissionsPending or NothingPending
  IMAGE      the image, its digest shortened to 12 hex digits
  AGE        since the Plugin was created

"-" means the operator has not written that condition yet. -o json or -o yaml
prints the Plugins as a PluginList instead.`,
		Example: `  openfief plugin list
  openfief plugin list -o yaml`,
		Args: exactArgs(0),
		RunE: runOptions(o),
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: json or yaml (default: a table)")
	return cmd
}

// Complete has nothing to fill: list takes no argument.
func (o *listOptions) Complete([]string) error { return nil }

// Validate refuses an -o other than json or yaml.
func (o *listOptions) Validate() error { return checkOutput(o.output) }

// Run lists the namespace's Plugins, sorted by name, as a table or, with
// -o, as a PluginList.
func (o *listOptions) Run(ctx context.Context) error {
	env := o.env
	c, err := env.Client()
	if err != nil {
		return err
	}
	var list v1alpha1.PluginList
	if err := c.List(ctx, &list, client.InNamespace(env.Namespace)); err != nil {
		return apiError("listing plugins", err)
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.Plugin) int { return cmp.Compare(a.Name, b.Name) })
	if o.output != outputTable {
		list.APIVersion, list.Kind = v1alpha1.GroupVersion.String(), "PluginList"
		list.ResourceVersion = ""
		for i := range list.Items {
			clean(&list.Items[i], "Plugin")
		}
		return printObject(env.Out, o.output, &list)
	}
	if len(list.Items) == 0 {
		fmt.Fprintf(env.ErrOut, "No plugins found in namespace %s.\n", env.Namespace)
		return nil
	}
	tw := tabwriter.NewWriter(env.Out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tREADY\tREASON\tSIGNATURE\tAPPROVAL\tIMAGE\tAGE")
	now := env.Now()
	for i := range list.Items {
		p := &list.Items[i]
		ready, reason := conditionColumns(p, v1alpha1.ConditionReady)
		_, signature := conditionColumns(p, v1alpha1.ConditionSignatureVerified)
		_, approval := conditionColumns(p, v1alpha1.ConditionApprovalRequired)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, cell(ready), cell(reason), cell(signature), cell(approval),
			shortImage(p.Spec.Image), display.Age(now, p.CreationTimestamp.Time))
	}
	return tw.Flush()
}

// conditionColumns returns a condition's status and reason, "-" for each
// when the operator has not written it.
func conditionColumns(p *v1alpha1.Plugin, t string) (status, reason string) {
	c := apimeta.FindStatusCondition(p.Status.Conditions, t)
	if c == nil {
		return "-", "-"
	}
	return string(c.Status), c.Reason
}

// clean prepares an object for printing: kind and apiVersion set, managed
// fields left out, as kubectl shows them.
func clean(obj client.Object, kind string) {
	obj.GetObjectKind().SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind))
	obj.SetManagedFields(nil)
}

// printObject writes obj (an API object or a command's report) as indented
// JSON or as YAML.
func printObject(w io.Writer, output string, obj any) error {
	var (
		b   []byte
		err error
	)
	if output == outputJSON {
		b, err = json.MarshalIndent(obj, "", "    ")
		b = append(b, '\n')
	} else {
		b, err = yaml.Marshal(obj)
	}
	if err != nil {
		return exitf(ExitFailure, "encoding %s: %w", output, err)
	}
	_, err = w.Write(b)
	return err
}

// statusOptions are `openfief plugin status`'s flags and argument.
type statusOptions struct {
	env     *Env
	output  string
	coreURL string

	// name is the argument NAME.
	name string
}

// newStatusCommand builds `openfief plugin status`: one plugin in detail.
func newStatusCommand(env *Env) *cobra.Command {
	o := &statusOptions{env: env}
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show one plugin: what runs, its trust, what is pending and what it holds",
		Long: `Show the Plugin NAME in detail:

  Image        the image spec.image asks for
  Deployed     the version that runs (status.deployed): image, signer, trust, when verified
  History      how many revisions status.history keeps, and the newest ('openfief plugin history')
  Requested    spec.manifest, the image's signed label
  Granted      the PluginGrant NAME, or none
  Pending      what is requested and not granted: what 'openfief plugin approve' would add
  Effective    what the running version holds: both requested and granted (status.effective)
  Conditions   Ready, SignatureVerified and ApprovalRequired, with their messages
  Core         what openfief-core recorded: last sync, next sync, last error,
               rows stored (through the API server's service proxy, or
               --core-url / $OPENFIEF_CORE_URL, with the owner's token)
  Removed data what the core keeps of earlier, uninstalled plugins of this
               name, with the keys 'openfief plugin purge-data' takes; shown
               also when no plugin NAME is installed

Pending is computed from the spec and the grant as they are now, the way the
operator computes status.pendingApproval. -o json or -o yaml prints the Plugin.`,
		Example: `  openfief plugin status nbp-fx
  openfief plugin status nbp-fx -o json`,
		Args: exactArgs(1),
		RunE: runOptions(o),
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: json or yaml (default: a description)")
	cmd.Flags().StringVar(&o.coreURL, "core-url", defaultCoreURL(), "read the sync status from the core's owner API at this URL instead of through the API server's service proxy: https, or http to a loopback address (default $"+EnvCoreURL+")")
	return cmd
}

// Complete takes NAME.
func (o *statusOptions) Complete(args []string) error {
	o.name = args[0]
	return nil
}

// Validate refuses an -o other than json or yaml.
func (o *statusOptions) Validate() error { return checkOutput(o.output) }

// Run describes the Plugin, its grant and what the core recorded of it,
// or prints the Plugin with -o; without a Plugin it still lists the data
// the core keeps of earlier ones of that name.
func (o *statusOptions) Run(ctx context.Context) error {
	env, name := o.env, o.name
	c, err := env.Client()
	if err != nil {
		return err
	}
	p, err := env.getPlugin(ctx, c, name)
	if err != nil {
		if ExitCode(err) == ExitNotFound && o.output == outputTable {
			env.printRemovedData(ctx, nil, o.coreURL, name)
		}
		return err
	}
	if o.output != outputTable {
		clean(p, "Plugin")
		return printObject(env.Out, o.output, p)
	}
	g, err := env.getGrant(ctx, c, name)
	if err != nil {
		return err
	}
	printStatus(env.Out, env.Now(), p, g, env.ApproveCommand)
	api, err := env.coreAPI(o.coreURL, coreStatusTimeout)
	if err != nil {
		return err
	}
	st, err := api.status(ctx, name)
	printCoreStatus(env.Out, env.Now(), st, err)
	if err == nil {
		env.printRemovedData(ctx, api, o.coreURL, name)
	}
	return nil
}

// coreStatusTimeout bounds the status command's question to the core.
const coreStatusTimeout = 10 * time.Second

// printStatus describes one plugin for a person.
func printStatus(w io.Writer, now time.Time, p *v1alpha1.Plugin, g *v1alpha1.PluginGrant, approve func(string) string) {
	fmt.Fprintf(w, "Name:         %s\n", p.Name)
	fmt.Fprintf(w, "Namespace:    %s\n", p.Namespace)
	fmt.Fprintf(w, "Age:          %s\n", display.Age(now, p.CreationTimestamp.Time))
	fmt.Fprintf(w, "Image:        %s\n", display.Text(p.Spec.Image))
	if p.Status.ObservedGeneration != 0 && p.Status.ObservedGeneration != p.Generation {
		fmt.Fprintf(w, "Note:         the status describes generation %d; the spec is at %d (the operator has not caught up)\n",
			p.Status.ObservedGeneration, p.Generation)
	}
	if d := p.Status.Deployed; d != nil {
		fmt.Fprintln(w, "Deployed:")
		fmt.Fprintf(w, "  Image:      %s\n", display.Text(d.Image))
		fmt.Fprintf(w, "  Signer:     %s (%s)\n", display.Text(orDash(d.Signer)), display.Text(orDash(d.Trust)))
		if d.VerifiedAt != nil {
			fmt.Fprintf(w, "  Verified:   %s (%s ago)\n", d.VerifiedAt.UTC().Format("2006-01-02T15:04:05Z"), display.Age(now, d.VerifiedAt.Time))
		}
		if d.Image != p.Spec.Image {
			fmt.Fprintln(w, "  (a previous version: the current spec does not run yet)")
		}
	} else {
		fmt.Fprintln(w, "Deployed:     nothing runs")
	}
	if h := historyOf(p).Items; len(h) > 0 {
		fmt.Fprintf(w, "History:      %d revision(s), the newest %d (see: openfief plugin history %s)\n", len(h), h[0].Revision, p.Name)
	}
	m := apiconv.ManifestFromAPI(p.Spec.Manifest)
	fmt.Fprintln(w, "Requested (spec.manifest):")
	printManifest(w, "  ", m)
	if g == nil {
		fmt.Fprintf(w, "Granted:      nothing (no PluginGrant %s)\n", p.Name)
	} else {
		fmt.Fprintf(w, "Granted (PluginGrant %s):\n", g.Name)
		describeGrant(w, "  ", g)
		warnOwnerHosts(w, "  ", m, grantFromAPI(g))
	}
	pending := plugins.NeedsApproval(m, grantFromAPI(g))
	if pending.IsEmpty() {
		fmt.Fprintln(w, "Pending:      nothing")
	} else {
		fmt.Fprintf(w, "Pending (approve with: %s):\n", approve(p.Name))
		describePending(w, "  ", pending, m)
	}
	if e := p.Status.Effective; e != nil {
		fmt.Fprintln(w, "Effective (what runs holds):")
		describeEffective(w, "  ", e)
	} else {
		fmt.Fprintln(w, "Effective:    nothing")
	}
	fmt.Fprintln(w, "Conditions:")
	if len(p.Status.Conditions) == 0 {
		fmt.Fprintln(w, "  none yet: the operator has not reconciled this plugin")
		return
	}
	conds := slices.Clone(p.Status.Conditions)
	order := map[string]int{v1alpha1.ConditionReady: 0, v1alpha1.ConditionSignatureVerified: 1, v1alpha1.ConditionApprovalRequired: 2}
	slices.SortStableFunc(conds, func(a, b metav1.Condition) int {
		oa, aok := order[a.Type]
		ob, bok := order[b.Type]
		switch {
		case aok && bok:
			return cmp.Compare(oa, ob)
		case aok != bok:
			if aok {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Type, b.Type)
	})
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
	for _, c := range conds {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", cell(c.Type), cell(string(c.Status)), cell(c.Reason), display.Age(now, c.LastTransitionTime.Time), display.Message(oneLine(c.Message)))
	}
	_ = tw.Flush()
}

// describeEffective lists status.effective, each Secret with its slot and
// mount path.
func describeEffective(w io.Writer, indent string, e *v1alpha1.EffectivePermissions) {
	caps := make([]string, len(e.Capabilities))
	for i, c := range e.Capabilities {
		caps[i] = string(c)
	}
	secrets := make([]string, len(e.Secrets))
	for i, s := range e.Secrets {
		secrets[i] = fmt.Sprintf("%s (Secret %s) at %s", display.Text(s.Name), display.Text(s.SecretName), display.Text(s.MountPath))
	}
	fmt.Fprintf(w, "%sCapabilities:  %s\n", indent, display.Join(display.Set(caps), ", "))
	fmt.Fprintf(w, "%sEgress:        %s\n", indent, display.Join(display.Set(e.Egress), ", "))
	fmt.Fprintf(w, "%sSecrets:       %s\n", indent, strings.Join(display.Set(secrets), ", "))
	fmt.Fprintf(w, "%sData tiers:    %s\n", indent, display.Join(display.Set(e.DataTiers), ", "))
	if r := apiconv.ResourcesFromAPI(e.Resources); !r.IsZero() {
		fmt.Fprintf(w, "%sResources:     %s\n", indent, display.Text(r.String()))
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cellMax bounds a table cell written by someone else (a condition's reason).
const cellMax = 64

// cell renders one table cell of outside text: escaped and bounded, so it
// can neither move the cursor nor add a column (a tab is escaped too).
func cell(s string) string { return display.Limit(s, cellMax) }

// oneLine keeps a message on one table row.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
