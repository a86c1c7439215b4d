package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// approvalError maps an error of plugins.Approve to the CLI's exit codes and
// words: nothing pending exits ExitNothingToDo; a refused selector exits
// ExitInvalid naming the flag and the value as given (flags maps a selector's
// field to them); anything else is a grant that would be invalid.
func approvalError(name string, flags map[string]string, err error) error {
	var fe *plugins.FieldError
	switch {
	case errors.Is(err, plugins.ErrNothingPending):
		return exitf(ExitNothingToDo, "nothing pending for plugin %q: its grant holds everything spec.manifest asks for", name)
	case errors.As(err, &fe) && flags[fe.Field] != "":
		msg := fe.Err.Error()
		if fe.Detail != "" {
			msg += ": " + fe.Detail
		}
		return exitf(ExitInvalid, "%s: %s", flags[fe.Field], msg)
	default:
		return exitf(ExitInvalid, "the grant would be invalid: %w", err)
	}
}

// selectorFlags names each selector of sel by the flag and value it came
// from, keyed by the field plugins.Approve reports ("selection.egress[1]").
func selectorFlags(sel plugins.Selection) map[string]string {
	flags := map[string]string{"selection.all": "--all"}
	for i, c := range sel.Capabilities {
		flags[fmt.Sprintf("selection.capabilities[%d]", i)] = "--capability " + string(c)
	}
	for i, h := range sel.Egress {
		flags[fmt.Sprintf("selection.egress[%d]", i)] = "--host " + h
	}
	for i, s := range sel.Secrets {
		flags[fmt.Sprintf("selection.secrets[%d]", i)] = "--secret " + s
	}
	for i, t := range sel.DataTiers {
		flags[fmt.Sprintf("selection.dataTiers[%d]", i)] = "--data-tier " + t
	}
	for i, s := range sel.PullSecrets {
		flags[fmt.Sprintf("selection.pullSecrets[%d]", i)] = "--pull-secret " + s
	}
	if sel.Resources {
		flags["selection.resources"] = "--resources"
	}
	return flags
}

// approveOptions are `openfief plugin approve`'s flags and argument.
type approveOptions struct {
	env *Env
	// sel holds the selectors; Complete adds --capability to it.
	sel  plugins.Selection
	caps []string
	yes  bool

	// name is the argument NAME.
	name string
}

// newApproveCommand builds `openfief plugin approve`: show what a plugin asks
// for beyond its grant and, on confirmation, add it to the PluginGrant (D-16).
func newApproveCommand(env *Env) *cobra.Command {
	o := &approveOptions{env: env}
	cmd := &cobra.Command{
		Use:   "approve NAME [--yes] [--host H]... [--secret SLOT[=SECRET]]... [--capability C]... [--data-tier T]... [--resources] [--pull-secret SECRET]...",
		Short: "Approve what a plugin asks for beyond its grant",
		Long: `Show what the Plugin NAME requests (spec.manifest, the image's signed label)
that its PluginGrant does not hold yet, and on confirmation create or update the
PluginGrant NAME to hold it. The operator runs a plugin only with what both
hold; approving more than requested is refused, since it adds nothing.

Without --host, --secret, --capability, --data-tier or --resources everything
pending is approved; with them, only the named parts (the rest stays pending).
--secret SLOT=SECRET binds the manifest's Secret slot to a Secret of your
choosing, so two instances of one image can read two accounts; unbound, the
Secret named like the slot is mounted. On a slot already granted it rebinds it.
With --all, everything pending is approved and the --secret bindings apply.

A plugin whose manifest has ownerEgress slots may also reach hosts of your
choosing that its vendor cannot know, such as your own WebDAV server or NAS:
--host H for a host the manifest does not request fills one free slot, and
is written to the grant's ownerEgress. Without a free slot it is refused.
Approving everything pending (no selector, or --all) never adds such a host.

A plugin gets 128Mi of memory, 500m of CPU and a 64Mi /tmp unless its
manifest asks for more (at most 2Gi, 2 CPUs and 1Gi). What it asks for beyond
its grant is pending like any other permission and shown with the defaults;
approving writes exactly the quantities asked for into the grant's resources
(--resources names them alone). Until then the version that ran before keeps
running with its own.

--pull-secret SECRET adds a Secret the kubelet pulls the plugin's image with
(a private registry); it is set on the plugin's pod and ServiceAccount, and
the operator never reads it. The manifest never asks for one, so naming only
--pull-secret approves nothing else. At most 8 per grant.

It asks for confirmation on standard input unless --yes is given; when
standard input is not a terminal, --yes is required. Nothing pending exits
with code 10.`,
		Example: `  # See what is pending and approve all of it
  openfief plugin approve nbp-fx

  # Approve only one new host, without a prompt
  openfief plugin approve nbp-fx --host api.nbp.pl --yes

  # Let a view that exports to your own server reach it (the manifest's ownerEgress slot)
  openfief plugin approve webdav --host cloud.example.com

  # Approve everything, mounting the Secret ibkr-account-2 for the slot ibkr-flex-credentials
  openfief plugin approve ibkr-2 --all --secret ibkr-flex-credentials=ibkr-account-2

  # Pull the image from a private registry with the Secret regcred
  openfief plugin approve nbp-fx --pull-secret regcred`,
		Args: exactArgs(1),
		RunE: runOptions(o),
	}
	f := cmd.Flags()
	f.BoolVarP(&o.yes, "yes", "y", false, "approve without asking")
	f.BoolVar(&o.sel.All, "all", false, "approve everything pending, even with --secret bindings")
	f.StringArrayVar(&o.sel.Egress, "host", nil, "approve only this egress host, host or host:port; one the manifest does not request fills a slot for a host of your choosing (repeatable)")
	f.StringArrayVar(&o.sel.Secrets, "secret", nil, "approve only this Secret slot, optionally bound to a Secret: SLOT or SLOT=SECRET (repeatable)")
	f.StringArrayVar(&o.caps, "capability", nil, "approve only this capability: connector or view (repeatable)")
	f.StringArrayVar(&o.sel.DataTiers, "data-tier", nil, "approve only this data tier (repeatable)")
	f.BoolVar(&o.sel.Resources, "resources", false, "approve only the memory, CPU and /tmp the manifest asks for beyond the grant, as asked")
	f.StringArrayVar(&o.sel.PullSecrets, "pull-secret", nil, "add this image pull Secret to the grant (repeatable)")
	return cmd
}

// Complete takes NAME and adds the --capability selectors to the selection.
func (o *approveOptions) Complete(args []string) error {
	o.name = args[0]
	o.sel.Capabilities = make([]plugins.Capability, len(o.caps))
	for i, c := range o.caps {
		o.sel.Capabilities[i] = plugins.Capability(c)
	}
	return nil
}

// Validate refuses --all with a selector that names what to approve; the
// selectors' values are checked against the manifest by plugins.Approve.
func (o *approveOptions) Validate() error {
	sel := o.sel
	if sel.All && (len(o.caps) > 0 || len(sel.Egress) > 0 || len(sel.DataTiers) > 0 || sel.Resources) {
		return usageError(fmt.Errorf("--all approves everything pending; combine it only with --secret or --pull-secret"))
	}
	return nil
}

// Run computes the approval against the Plugin's manifest and its grant,
// shows it, asks, and writes the grant.
func (o *approveOptions) Run(ctx context.Context) error {
	env, name := o.env, o.name
	c, err := env.Client()
	if err != nil {
		return err
	}
	p, err := env.getPlugin(ctx, c, name)
	if err != nil {
		return err
	}
	g, err := env.getGrant(ctx, c, name)
	if err != nil {
		return err
	}
	m := apiconv.ManifestFromAPI(p.Spec.Manifest)
	a, err := plugins.Approve(name, m, grantFromAPI(g), o.sel)
	if err != nil {
		err = approvalError(name, selectorFlags(o.sel), err)
		if ExitCode(err) == ExitNothingToDo {
			fmt.Fprintf(env.Out, "Plugin %s: nothing pending approval.\n", name)
		}
		return err
	}
	printApprovalPrompt(env.Out, name, p.Spec.Image, a, m)
	warnSignature(env.ErrOut, p)
	if err := env.confirm(ctx, o.yes, fmt.Sprintf("Approve this for plugin %s?", name), "approving plugin "+name); err != nil {
		return err
	}
	verb, err := env.writeGrant(ctx, c, name, g, a)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Out, "plugingrant/%s %s\n", name, verb)
	return nil
}

// printApprovalPrompt writes what approve shows before it asks: what the
// plugin asks for beyond its grant, what this approval adds, and what stays
// pending. It depends on plain values only, so the consent test renders it
// exactly as the command does.
func printApprovalPrompt(w io.Writer, name, image string, a plugins.Approval, m plugins.Manifest) {
	fmt.Fprintf(w, "Plugin %s (image %s) asks for what its grant does not hold:\n", display.Text(name), shortImage(image))
	if a.Pending.IsEmpty() {
		fmt.Fprintln(w, "  nothing")
	}
	describePending(w, "  ", a.Pending, m)
	fmt.Fprintln(w, "This approves:")
	describeApproval(w, "  ", a, m)
	if left := a.Remaining(); !left.IsEmpty() {
		fmt.Fprintln(w, "Still pending afterwards:")
		describePending(w, "  ", left, m)
	}
	if free := plugins.FreeOwnerSlots(m, &a.Grant); free > 0 {
		fmt.Fprintf(w, "It may also reach %d more host(s) of your choosing; name one with --host.\n", free)
	}
}

// writeGrant writes an approval's grant: it creates the PluginGrant name
// when g is nil, else updates g, refused if its spec changed since it was
// read (updateSpec). It returns "created" or "configured".
func (e *Env) writeGrant(ctx context.Context, c client.Client, name string, g *v1alpha1.PluginGrant, a plugins.Approval) (string, error) {
	want := apiconv.GrantToAPI(a.Grant)
	if g == nil {
		g = &v1alpha1.PluginGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace}, Spec: want}
		if err := c.Create(ctx, g, fieldOwner); err != nil {
			return "", writeError("writing plugingrant "+name, err)
		}
		return "created", nil
	}
	err := updateSpec(ctx, c, g, func(g *v1alpha1.PluginGrant) any { return g.Spec }, func(g *v1alpha1.PluginGrant) { g.Spec = want })
	if err != nil {
		return "", writeError("writing plugingrant "+name, err)
	}
	return "configured", nil
}

// describeApproval lists what an approval adds, with each Secret slot's
// Secret, and the slots it rebinds.
func describeApproval(w io.Writer, indent string, a plugins.Approval, m plugins.Manifest) {
	shown := a.Approved
	shown.Secrets = nil
	describePending(w, indent, shown, m)
	for _, s := range a.Secrets {
		fmt.Fprintf(w, "%sSecret slot:   %s, mounting Secret %s\n", indent, slotAt(s.Slot, s.MountPath), display.Text(s.SecretName))
	}
	for _, s := range a.Rebound {
		fmt.Fprintf(w, "%sRebind:        slot %s to Secret %s\n", indent, display.Text(s.Slot), display.Text(s.SecretName))
	}
	if len(a.PullSecrets) > 0 {
		fmt.Fprintf(w, "%sPull secrets:  %s (the grant then holds %s)\n", indent, display.Join(a.PullSecrets, ", "), display.Join(a.Grant.ImagePullSecrets, ", "))
	}
	if len(a.OwnerEgress) > 0 {
		fmt.Fprintf(w, "%sYour hosts:    %s (hosts of your choosing, not requested by the plugin; %d of %d slots then used)\n",
			indent, display.Join(a.OwnerEgress, ", "), len(plugins.OwnerHosts(m, &a.Grant)), m.OwnerSlots())
	}
}

// warnSignature warns when the operator found the current image's
// signature not verified: approving then changes nothing until it is.
func warnSignature(w io.Writer, p *v1alpha1.Plugin) {
	cond := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionSignatureVerified)
	if cond == nil || cond.Status == metav1.ConditionTrue || p.Status.ObservedGeneration != p.Generation {
		return
	}
	fmt.Fprintf(w, "Warning: the operator has not verified this image (%s: %s); it will not run until it does.\n", display.Text(cond.Reason), display.Message(cond.Message))
}

// revokeOptions are `openfief plugin revoke`'s flags and argument.
type revokeOptions struct {
	env *Env
	yes bool

	// name is the argument NAME.
	name string
}

// newRevokeCommand builds `openfief plugin revoke`: delete the PluginGrant,
// which revokes everything at once.
func newRevokeCommand(env *Env) *cobra.Command {
	o := &revokeOptions{env: env}
	cmd := &cobra.Command{
		Use:   "revoke NAME [--yes]",
		Short: "Delete a plugin's grant, revoking everything it was approved",
		Long: `Delete the PluginGrant NAME. The operator stops the plugin at once and keeps
only its deny-all NetworkPolicy (NoGrant); the Plugin stays installed, and
'openfief plugin approve NAME' grants it again. Asks for confirmation unless
--yes is given.`,
		Example: `  openfief plugin revoke nbp-fx
  openfief plugin revoke nbp-fx --yes`,
		Args: exactArgs(1),
		RunE: runOptions(o),
	}
	cmd.Flags().BoolVarP(&o.yes, "yes", "y", false, "revoke without asking")
	return cmd
}

// Complete takes NAME.
func (o *revokeOptions) Complete(args []string) error {
	o.name = args[0]
	return nil
}

// Validate has nothing to refuse: NAME is checked against the cluster.
func (o *revokeOptions) Validate() error { return nil }

// Run shows what the grant approves, asks, and deletes exactly the grant
// it showed.
func (o *revokeOptions) Run(ctx context.Context) error {
	env, name := o.env, o.name
	c, err := env.Client()
	if err != nil {
		return err
	}
	g, err := env.getGrant(ctx, c, name)
	if err != nil {
		return err
	}
	if g == nil {
		return exitf(ExitNotFound, "plugingrant %q not found in namespace %q: plugin %s has no grant to revoke", name, env.Namespace, name)
	}
	fmt.Fprintf(env.Out, "PluginGrant %s approves:\n", name)
	describeGrant(env.Out, "  ", g)
	if err := env.confirm(ctx, o.yes, fmt.Sprintf("Revoke everything granted to plugin %s?", name), "revoking the grant of plugin "+name); err != nil {
		return err
	}
	if err := c.Delete(ctx, g, client.Preconditions{UID: &g.UID, ResourceVersion: &g.ResourceVersion}); err != nil {
		return writeError("deleting plugingrant "+name, err)
	}
	fmt.Fprintf(env.Out, "plugingrant/%s deleted; plugin %s now runs nothing\n", name, name)
	return nil
}

// describeGrant lists what a grant approves, each Secret slot with the
// Secret it mounts.
func describeGrant(w io.Writer, indent string, g *v1alpha1.PluginGrant) {
	caps := make([]string, len(g.Spec.Capabilities))
	for i, c := range g.Spec.Capabilities {
		caps[i] = string(c)
	}
	hosts := make([]string, len(g.Spec.Egress))
	for i, h := range g.Spec.Egress {
		hosts[i] = string(h)
	}
	secrets := make([]string, len(g.Spec.Secrets))
	for i, s := range g.Spec.Secrets {
		secrets[i] = s.Name
		if s.SecretName != "" && s.SecretName != s.Name {
			secrets[i] += "=" + s.SecretName
		}
	}
	tiers := make([]string, len(g.Spec.DataTiers))
	for i, t := range g.Spec.DataTiers {
		tiers[i] = string(t)
	}
	fmt.Fprintf(w, "%sCapabilities:  %s\n", indent, display.Join(display.Set(caps), ", "))
	fmt.Fprintf(w, "%sEgress:        %s\n", indent, display.Join(display.Set(canonical(hosts)), ", "))
	fmt.Fprintf(w, "%sSecrets:       %s\n", indent, display.Join(display.Set(secrets), ", "))
	fmt.Fprintf(w, "%sData tiers:    %s\n", indent, display.Join(display.Set(tiers), ", "))
	if len(g.Spec.ImagePullSecrets) > 0 {
		fmt.Fprintf(w, "%sPull secrets:  %s\n", indent, display.Join(display.Set(g.Spec.ImagePullSecrets), ", "))
	}
	if len(g.Spec.OwnerEgress) > 0 {
		own := make([]string, len(g.Spec.OwnerEgress))
		for i, h := range g.Spec.OwnerEgress {
			own[i] = string(h)
		}
		fmt.Fprintf(w, "%sYour hosts:    %s\n", indent, display.Join(display.Set(canonical(own)), ", "))
	}
	if r := apiconv.ResourcesFromAPI(g.Spec.Resources); !r.IsZero() {
		fmt.Fprintf(w, "%sResources:     %s\n", indent, display.Text(r.String()))
	}
}
