package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// secretsUsed returns the Secrets a plugin mounts or may mount: each Secret
// slot of its spec and of its deployed version, bound through the grant or
// named like the slot, every Secret the grant binds, and the effective ones.
// Either argument may be nil.
func secretsUsed(p *v1alpha1.Plugin, g *v1alpha1.PluginGrant) map[string]bool {
	used := map[string]bool{}
	bound := map[string]string{}
	if g != nil {
		for _, s := range g.Spec.Secrets {
			name := s.SecretName
			if name == "" {
				name = s.Name
			}
			bound[s.Name] = name
			used[name] = true
		}
	}
	slot := func(s v1alpha1.SecretMount) {
		if name, ok := bound[s.Name]; ok {
			used[name] = true
		} else {
			used[s.Name] = true
		}
	}
	if p != nil {
		for _, s := range p.Spec.Manifest.Secrets {
			slot(s)
		}
		if d := p.Status.Deployed; d != nil {
			for _, s := range d.Manifest.Secrets {
				slot(s)
			}
		}
		if e := p.Status.Effective; e != nil {
			for _, s := range e.Secrets {
				used[s.SecretName] = true
			}
		}
	}
	delete(used, "")
	return used
}

// purgePlan is what `uninstall --purge` deletes and keeps.
type purgePlan struct {
	grant   *v1alpha1.PluginGrant
	secrets []*corev1.Secret
	// kept maps a Secret the plugin uses to the other plugins using it.
	kept map[string][]string
}

// planPurge finds the grant of name and the existing Secrets that only it
// uses: no other Plugin's manifest, deployed version or grant, and no other
// grant, names them (D-58).
func (e *Env) planPurge(ctx context.Context, c client.Client, name string, p *v1alpha1.Plugin) (purgePlan, error) {
	var plan purgePlan
	var pl v1alpha1.PluginList
	if err := c.List(ctx, &pl, client.InNamespace(e.Namespace)); err != nil {
		return plan, apiError("listing plugins", err)
	}
	var gl v1alpha1.PluginGrantList
	if err := c.List(ctx, &gl, client.InNamespace(e.Namespace)); err != nil {
		return plan, apiError("listing plugingrants", err)
	}
	grants := map[string]*v1alpha1.PluginGrant{}
	for i := range gl.Items {
		grants[gl.Items[i].Name] = &gl.Items[i]
	}
	plan.grant = grants[name]
	users := map[string][]string{} // Secret -> other plugin names
	seen := map[string]bool{name: true}
	for i := range pl.Items {
		q := &pl.Items[i]
		if seen[q.Name] {
			continue
		}
		seen[q.Name] = true
		for s := range secretsUsed(q, grants[q.Name]) {
			users[s] = append(users[s], q.Name)
		}
	}
	for gname, g := range grants {
		if seen[gname] {
			continue
		}
		for s := range secretsUsed(nil, g) {
			users[s] = append(users[s], gname+" (grant only)")
		}
	}
	plan.kept = map[string][]string{}
	for _, s := range sortedKeys(secretsUsed(p, plan.grant)) {
		if others := users[s]; len(others) > 0 {
			slices.Sort(others)
			plan.kept[s] = others
			continue
		}
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

// newUninstallCommand builds `openfief plugin uninstall` (D-58).
func newUninstallCommand(env *Env) *cobra.Command {
	var wait time.Duration
	var purge, yes bool
	cmd := &cobra.Command{
		Use:   "uninstall NAME [--purge] [--yes]",
		Short: "Remove a plugin; with --purge also its grant and the Secrets only it used",
		Long: `Delete the Plugin NAME. The operator's objects for it (Deployment, Service,
NetworkPolicy, ServiceAccount, config) go with it by garbage collection, and its
egress allow-list entry is removed. Its PluginGrant and Secrets stay, so a
reinstall under the same name gets them back.

With --purge it also deletes the PluginGrant NAME and the Secrets only this
plugin used: the Secrets its manifest's slots, its deployed version and its
grant name, except those another Plugin or grant in the namespace also names
(those are listed as kept). The operator never reads Secrets; the CLI does, with
your credentials. With --purge and no Plugin left, the grant and Secrets are
still purged.

Everything to be deleted is listed first, and confirmed unless --yes is given.`,
		Example: `  openfief plugin uninstall nbp-fx
  openfief plugin uninstall ibkr-main --purge --yes`,
		Args: exactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			name := args[0]
			ctx := cmd.Context()
			c, err := env.Client()
			if err != nil {
				return err
			}
			p, err := env.getPlugin(ctx, c, name)
			if err != nil && (!purge || ExitCode(err) != ExitNotFound) {
				return err
			}
			var plan purgePlan
			if purge {
				if plan, err = env.planPurge(ctx, c, name, p); err != nil {
					return err
				}
				if p == nil && plan.grant == nil && len(plan.secrets) == 0 {
					return exitf(ExitNotFound, "plugin %q not found in namespace %q, and nothing of it is left to purge", name, env.Namespace)
				}
			}
			fmt.Fprintln(env.Out, "This deletes:")
			if p != nil {
				fmt.Fprintf(env.Out, "  plugin/%s (image %s)\n", name, shortImage(p.Spec.Image))
			}
			if plan.grant != nil {
				fmt.Fprintf(env.Out, "  plugingrant/%s\n", name)
			}
			for _, s := range plan.secrets {
				fmt.Fprintf(env.Out, "  secret/%s\n", s.Name)
			}
			if len(plan.kept) > 0 {
				fmt.Fprintln(env.Out, "Keeps, since other plugins use them:")
				for _, s := range sortedKeys(keysOf(plan.kept)) {
					fmt.Fprintf(env.Out, "  secret/%s (used by %s)\n", s, strings.Join(plan.kept[s], ", "))
				}
			}
			if !purge {
				fmt.Fprintf(env.Out, "Keeps plugingrant/%s and its Secrets, if any; --purge deletes them.\n", name)
			}
			if err := env.confirm(ctx, yes, fmt.Sprintf("Uninstall plugin %s?", name), "uninstalling plugin "+name); err != nil {
				return err
			}
			if p != nil {
				if err := deleteObject(ctx, c, p); err != nil {
					return writeError("deleting plugin "+name, err)
				}
				fmt.Fprintf(env.Out, "plugin/%s deleted\n", name)
			}
			if plan.grant != nil {
				if err := deleteObject(ctx, c, plan.grant); err != nil {
					return writeError("deleting plugingrant "+name, err)
				}
				fmt.Fprintf(env.Out, "plugingrant/%s deleted\n", name)
			}
			for _, s := range plan.secrets {
				if err := deleteObject(ctx, c, s); err != nil {
					return writeError("deleting secret "+s.Name, err)
				}
				fmt.Fprintf(env.Out, "secret/%s deleted\n", s.Name)
			}
			if wait > 0 && p != nil {
				return waitWorkloadGone(ctx, env, c, name, wait)
			}
			return nil
		}),
	}
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long until the garbage collector has removed the plugin's workload objects")
	cmd.Flags().BoolVar(&purge, "purge", false, "also delete the plugin's grant and the Secrets only it used (D-58)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "delete without asking")
	return cmd
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

func keysOf(m map[string][]string) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// waitWorkloadGone polls until no object of the plugin's workload is left:
// the cluster's garbage collector removes them once the Plugin, their owner,
// is gone.
func waitWorkloadGone(ctx context.Context, env *Env, c client.Client, name string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	sel := client.MatchingLabels{plugins.LabelPluginName: name}
	lists := []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &corev1.ServiceAccountList{}, &networkingv1.NetworkPolicyList{}}
	for {
		left := 0
		for _, l := range lists {
			if err := c.List(ctx, l, client.InNamespace(env.Namespace), sel); err == nil {
				left += meta.LenList(l)
			}
		}
		if left == 0 {
			fmt.Fprintf(env.Out, "the workload of plugin %s is gone (garbage-collected)\n", name)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d workload objects of plugin %s remain after %s", left, name, within)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
