package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// purgePlan is what `uninstall --purge` deletes and keeps.
type purgePlan struct {
	grant *v1alpha1.PluginGrant
	// secrets are the existing Secrets plugins.PurgeSecrets deletes.
	secrets []*corev1.Secret
	// kept are the Secrets the grant binds that other grants bind too.
	kept []plugins.KeptSecret
	// uninstalled names the other grants whose Plugin is gone.
	uninstalled map[string]bool
}

// planPurge finds the grant of name and asks the domain which Secrets
// purging it deletes (plugins.PurgeSecrets, D-58): only those its grant binds
// and no other grant in the namespace binds. Of those it keeps the ones that
// exist; it never looks at what a manifest requests.
func (e *Env) planPurge(ctx context.Context, c client.Client, name string) (purgePlan, error) {
	var plan purgePlan
	var gl v1alpha1.PluginGrantList
	if err := c.List(ctx, &gl, client.InNamespace(e.Namespace)); err != nil {
		return plan, apiError("listing plugingrants", err)
	}
	var pl v1alpha1.PluginList
	if err := c.List(ctx, &pl, client.InNamespace(e.Namespace)); err != nil {
		return plan, apiError("listing plugins", err)
	}
	installed := map[string]bool{}
	for _, p := range pl.Items {
		installed[p.Name] = true
	}
	target := plugins.Grant{Name: name}
	var others []plugins.Grant
	plan.uninstalled = map[string]bool{}
	for i := range gl.Items {
		g := &gl.Items[i]
		if g.Name == name {
			plan.grant, target = g, apiconv.GrantFromAPI(g)
			continue
		}
		others = append(others, apiconv.GrantFromAPI(g))
		plan.uninstalled[g.Name] = !installed[g.Name]
	}
	purge := plugins.PurgeSecrets(target, others)
	plan.kept = purge.Keep
	for _, s := range purge.Delete {
		var secret corev1.Secret
		err := c.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: s}, &secret)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return plan, exitf(ExitFailure, "reading secret %s: %w", s, err)
		}
		plan.secrets = append(plan.secrets, &secret)
	}
	return plan, nil
}

// uninstallOptions are `openfief plugin uninstall`'s flags and argument.
type uninstallOptions struct {
	env       *Env
	wait      time.Duration
	dataWait  time.Duration
	purge     bool
	purgeData bool
	yes       bool
	coreURL   string

	// name is the argument NAME.
	name string
}

// newUninstallCommand builds `openfief plugin uninstall` (D-58).
func newUninstallCommand(env *Env) *cobra.Command {
	o := &uninstallOptions{env: env}
	cmd := &cobra.Command{
		Use:   "uninstall NAME [--purge] [--purge-data] [--yes]",
		Short: "Remove a plugin; with --purge also its grant and the Secrets only its grant binds",
		Long: `Delete the Plugin NAME. The operator's objects for it (Deployment, Service,
NetworkPolicy, ServiceAccount, config) go with it by garbage collection, and its
egress allow-list entry is removed. Its PluginGrant and Secrets stay, so a
reinstall under the same name gets them back.

With --purge it also deletes the PluginGrant NAME and the Secrets its grant
binds (each granted slot's bound Secret, or the Secret named like the slot when
unbound), except those another PluginGrant in the namespace binds too (those
are listed as kept). A Secret the manifest asks for but the grant never bound
is never deleted. The operator never reads Secrets; the CLI does, with your
credentials. With --purge and no Plugin left, the grant and Secrets are still
purged.

openfief-core keeps the data it stored for the plugin (transactions, balances,
prices, FX rates, index readings, problems) under a key of its own, marked
removed: a plugin installed again under the same name starts with nothing, and
'openfief plugin purge-data' lists and deletes the kept data. With --purge-data
the CLI waits (up to --purge-data-wait) for the core to mark the data removed,
shows how many rows of each table go, asks again, and deletes them.

Everything to be deleted is listed first, and confirmed unless --yes is given.`,
		Example: `  openfief plugin uninstall nbp-fx
  openfief plugin uninstall ibkr-main --purge --yes
  openfief plugin uninstall nbp-fx --purge-data`,
		Args: exactArgs(1),
		RunE: runOptions(o),
	}
	cmd.Flags().BoolVar(&o.purgeData, "purge-data", false, "also delete the data openfief-core stored for the plugin, once the core has marked it removed")
	cmd.Flags().DurationVar(&o.dataWait, "purge-data-wait", DefaultPurgeDataWait, "with --purge-data, wait up to this long for the core to mark the data removed")
	cmd.Flags().StringVar(&o.coreURL, "core-url", defaultCoreURL(), "with --purge-data, call the core's owner API at this URL instead of through the API server's service proxy: https, or http to a loopback address (default $"+EnvCoreURL+")")
	cmd.Flags().DurationVar(&o.wait, "wait", 0, "wait up to this long until the garbage collector has removed the plugin's workload objects")
	cmd.Flags().BoolVar(&o.purge, "purge", false, "also delete the plugin's grant and the Secrets only its grant binds")
	cmd.Flags().BoolVarP(&o.yes, "yes", "y", false, "delete without asking")
	return cmd
}

// Complete takes NAME.
func (o *uninstallOptions) Complete(args []string) error {
	o.name = args[0]
	return nil
}

// Validate accepts every combination of flags: NAME is checked against
// the cluster, which holds only valid names.
func (o *uninstallOptions) Validate() error { return nil }

// Run finds what goes, asks the core whether it holds data of the plugin
// (--purge-data), lists everything, asks, deletes, then waits for the
// workload (--wait) and purges the data.
func (o *uninstallOptions) Run(ctx context.Context) error {
	env := o.env
	c, err := env.Client()
	if err != nil {
		return err
	}
	p, plan, err := o.find(ctx, c)
	if err != nil {
		return err
	}
	// With --purge-data the core must answer before anything is
	// deleted: whether it holds data of the plugin.
	var api *coreAPI
	hasData := false
	if o.purgeData {
		if api, hasData, err = env.coreData(ctx, o.coreURL, o.name); err != nil {
			return err
		}
	}
	o.describe(p, plan, hasData)
	if err := env.confirm(ctx, o.yes, fmt.Sprintf("Uninstall plugin %s?", o.name), "uninstalling plugin "+o.name); err != nil {
		return err
	}
	if err := o.delete(ctx, c, p, plan); err != nil {
		return err
	}
	if o.wait > 0 && p != nil {
		if err := waitWorkloadGone(ctx, env, env.Out, c, o.name, o.wait); err != nil {
			return err
		}
	}
	if o.purgeData {
		return env.purgeUninstalled(ctx, api, p, o.name, hasData, o.dataWait, o.yes)
	}
	return nil
}

// find reads the Plugin and, with --purge, what purging deletes; without a
// Plugin, --purge still goes on unless nothing of it is left.
func (o *uninstallOptions) find(ctx context.Context, c client.Client) (*v1alpha1.Plugin, purgePlan, error) {
	var plan purgePlan
	p, err := o.env.getPlugin(ctx, c, o.name)
	if err != nil && (!o.purge || ExitCode(err) != ExitNotFound) {
		return nil, plan, err
	}
	if o.purge {
		if plan, err = o.env.planPurge(ctx, c, o.name); err != nil {
			return nil, plan, err
		}
		if p == nil && plan.grant == nil && len(plan.secrets) == 0 {
			return nil, plan, exitf(ExitNotFound, "plugin %q not found in namespace %q, and nothing of it is left to purge", o.name, o.env.Namespace)
		}
	}
	return p, plan, nil
}

// describe lists what the uninstall deletes and keeps, before it asks.
func (o *uninstallOptions) describe(p *v1alpha1.Plugin, plan purgePlan, hasData bool) {
	w, name := o.env.Out, o.name
	fmt.Fprintln(w, "This deletes:")
	if p != nil {
		fmt.Fprintf(w, "  plugin/%s (image %s)\n", name, shortImage(p.Spec.Image))
	}
	if hasData && p != nil {
		fmt.Fprintln(w, "  the data openfief-core stored for it (counted and confirmed before it goes)")
	}
	if plan.grant != nil {
		fmt.Fprintf(w, "  plugingrant/%s\n", name)
	}
	for _, s := range plan.secrets {
		fmt.Fprintf(w, "  secret/%s\n", display.Text(s.Name))
	}
	describeKept(w, plan)
	if !o.purge {
		fmt.Fprintf(w, "Keeps plugingrant/%s and its Secrets, if any; --purge deletes them.\n", name)
	}
}

// delete deletes the Plugin, then the grant and Secrets of plan, saying so
// for each.
func (o *uninstallOptions) delete(ctx context.Context, c client.Client, p *v1alpha1.Plugin, plan purgePlan) error {
	w, name := o.env.Out, o.name
	if p != nil {
		if err := deleteObject(ctx, c, p); err != nil {
			return writeError("deleting plugin "+name, err)
		}
		fmt.Fprintf(w, "plugin/%s deleted\n", name)
	}
	if plan.grant != nil {
		if err := deleteObject(ctx, c, plan.grant); err != nil {
			return writeError("deleting plugingrant "+name, err)
		}
		fmt.Fprintf(w, "plugingrant/%s deleted\n", name)
	}
	for _, s := range plan.secrets {
		if err := deleteObject(ctx, c, s); err != nil {
			return writeError("deleting secret "+s.Name, err)
		}
		fmt.Fprintf(w, "secret/%s deleted\n", display.Text(s.Name))
	}
	return nil
}

// deleteObject deletes exactly the object that was listed (same UID); one
// already gone counts as deleted.
func deleteObject(ctx context.Context, c client.Client, obj client.Object) error {
	uid := obj.GetUID()
	err := c.Delete(ctx, obj, client.Preconditions{UID: &uid})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// describeKept lists the Secrets purge keeps because other grants bind
// them, with those grants; a grant whose Plugin is gone says so.
func describeKept(w io.Writer, plan purgePlan) {
	if len(plan.kept) == 0 {
		return
	}
	fmt.Fprintln(w, "Keeps, since other plugins' grants bind them:")
	for _, k := range plan.kept {
		by := make([]string, len(k.BoundBy))
		for i, g := range k.BoundBy {
			by[i] = display.Text(g)
			if plan.uninstalled[g] {
				by[i] += " (grant only)"
			}
		}
		fmt.Fprintf(w, "  secret/%s (bound by %s)\n", display.Text(k.Secret), strings.Join(by, ", "))
	}
}

// waitWorkloadGone polls until no object of the plugin's workload is left:
// the cluster's garbage collector removes them once the Plugin, their owner,
// is gone. It says so on w.
func waitWorkloadGone(ctx context.Context, env *Env, w io.Writer, c client.Client, name string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	sel := client.MatchingLabels{plugins.LabelPluginName: name}
	lists := []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &corev1.ServiceAccountList{}, &networkingv1.NetworkPolicyList{}}
	for {
		left := 0
		for _, l := range lists {
			if err := c.List(ctx, l, client.InNamespace(env.Namespace), sel); err == nil {
				left += apimeta.LenList(l)
			}
		}
		if left == 0 {
			fmt.Fprintf(w, "the workload of plugin %s is gone (garbage-collected)\n", name)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d workload objects of plugin %s remain after %s", left, name, within)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
