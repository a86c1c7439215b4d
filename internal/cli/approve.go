package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// selection is what `approve` was asked to approve: everything pending, or
// only the named parts; Secret slots may be bound to Secrets of the owner's
// choosing (OF-1).
type selection struct {
	all          bool
	capabilities []string
	hosts        []string
	secrets      []string // SLOT or SLOT=SECRET
	tiers        []string
}

// named reports whether any part was named, so only those are approved.
func (s selection) named() bool {
	return len(s.capabilities) > 0 || len(s.hosts) > 0 || len(s.tiers) > 0 || (len(s.secrets) > 0 && !s.all)
}

// approval is what one approve adds to a grant.
type approval struct {
	// pending is everything requested and not granted before.
	pending plugins.Pending
	// approved is the part of pending this approval adds.
	approved plugins.Pending
	// bindings maps a Secret slot to the Secret it is bound to, for slots
	// approved or rebound with SLOT=SECRET.
	bindings map[string]string
	// rebound lists already granted slots whose Secret changes.
	rebound []string
	// grant is the grant after the approval, validated.
	grant plugins.Grant
}

// planApproval computes, without writing anything, the grant that approves
// sel of what m requests beyond current (D-16). It refuses a selector that
// names nothing pending and an approval that would change nothing.
func planApproval(name string, m plugins.Manifest, current *plugins.Grant, sel selection) (approval, error) {
	a := approval{pending: plugins.NeedsApproval(m, current), bindings: map[string]string{}}
	next := plugins.Grant{Name: name}
	if current != nil {
		next = *current
		next.Name = name
		next.Capabilities = slices.Clone(current.Capabilities)
		next.Egress = slices.Clone(current.Egress)
		next.Secrets = slices.Clone(current.Secrets)
		next.DataTiers = slices.Clone(current.DataTiers)
	}
	slots := map[string]bool{}
	for _, s := range m.Secrets {
		slots[s.Name] = true
	}
	for _, b := range sel.secrets {
		slot, secret, hasSecret := strings.Cut(b, "=")
		switch {
		case !slots[slot]:
			return a, exitf(ExitInvalid, "--secret %s: the manifest has no Secret slot %q (slots: %s)", b, slot, orNone(sortedKeys(slots)))
		case hasSecret && secret == "":
			return a, exitf(ExitInvalid, "--secret %s: empty Secret name; write SLOT or SLOT=SECRET", b)
		case !hasSecret:
			secret = slot
		}
		if _, dup := a.bindings[slot]; dup {
			return a, exitf(ExitInvalid, "--secret %s: slot %q named twice", b, slot)
		}
		a.bindings[slot] = secret
	}

	if !sel.named() {
		a.approved = a.pending
	} else {
		var err error
		if a.approved, err = pick(a.pending, m, current, sel); err != nil {
			return a, err
		}
	}
	// A binding for a slot the grant already holds rebinds it.
	for slot, secret := range a.bindings {
		if slices.Contains(a.approved.Secrets, slot) {
			continue
		}
		if !slices.Contains(a.pending.Secrets, slot) {
			i := slices.IndexFunc(next.Secrets, func(s plugins.SecretGrant) bool { return s.Name == slot })
			if i >= 0 && boundSecret(next.Secrets[i]) != secret {
				next.Secrets[i].SecretName = secretNameFor(slot, secret)
				a.rebound = append(a.rebound, slot)
				continue
			}
			return a, exitf(ExitInvalid, "--secret %s: slot %q is already granted with Secret %q", slot+"="+secret, slot, secret)
		}
	}
	slices.Sort(a.rebound)
	if a.approved.IsEmpty() && len(a.rebound) == 0 {
		return a, exitf(ExitNothingToDo, "nothing pending for plugin %q: its grant holds everything spec.manifest asks for", name)
	}

	next.Capabilities = append(next.Capabilities, a.approved.Capabilities...)
	next.Egress = append(next.Egress, a.approved.Egress...)
	for _, slot := range a.approved.Secrets {
		next.Secrets = append(next.Secrets, plugins.SecretGrant{Name: slot, SecretName: secretNameFor(slot, a.bindings[slot])})
	}
	next.DataTiers = append(next.DataTiers, a.approved.DataTiers...)
	slices.Sort(next.Capabilities)
	slices.Sort(next.Egress)
	slices.SortFunc(next.Secrets, func(x, y plugins.SecretGrant) int { return strings.Compare(x.Name, y.Name) })
	slices.Sort(next.DataTiers)
	if err := next.Validate(); err != nil {
		return a, exitf(ExitInvalid, "the grant would be invalid: %w", err)
	}
	a.grant = next
	return a, nil
}

// pick keeps the named parts of pending; naming anything that is not
// pending is an error that says whether it is granted or not requested.
func pick(pending plugins.Pending, m plugins.Manifest, current *plugins.Grant, sel selection) (plugins.Pending, error) {
	var out plugins.Pending
	if current == nil {
		current = &plugins.Grant{}
	}
	notPending := func(flag, value string, requested bool) error {
		if requested {
			return exitf(ExitInvalid, "%s %s: already granted, not pending", flag, value)
		}
		return exitf(ExitInvalid, "%s %s: not requested by the plugin's manifest; a grant beyond the request adds nothing (D-16)", flag, value)
	}
	for _, c := range sel.capabilities {
		if !slices.Contains(pending.Capabilities, plugins.Capability(c)) {
			return out, notPending("--capability", c, slices.Contains(m.Capabilities, plugins.Capability(c)))
		}
		out.Capabilities = appendOnce(out.Capabilities, plugins.Capability(c))
	}
	for _, h := range sel.hosts {
		canon, err := plugins.CanonicalEgressHost(h)
		if err != nil {
			return out, exitf(ExitInvalid, "--host %s: %w", h, err)
		}
		if !slices.Contains(pending.Egress, canon) {
			return out, notPending("--host", h, slices.Contains(canonical(m.Egress), canon))
		}
		out.Egress = appendOnce(out.Egress, canon)
	}
	for _, t := range sel.tiers {
		if !slices.Contains(pending.DataTiers, t) {
			return out, notPending("--data-tier", t, slices.Contains(m.DataTiers, t))
		}
		out.DataTiers = appendOnce(out.DataTiers, t)
	}
	if !sel.all {
		for _, b := range sel.secrets {
			slot, _, _ := strings.Cut(b, "=")
			if slices.Contains(pending.Secrets, slot) {
				out.Secrets = appendOnce(out.Secrets, slot)
			}
		}
	}
	slices.Sort(out.Capabilities)
	slices.Sort(out.Egress)
	slices.Sort(out.Secrets)
	slices.Sort(out.DataTiers)
	return out, nil
}

func appendOnce[T comparable](s []T, v T) []T {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// secretNameFor is the SecretName a grant records: empty when the slot's
// own name is used.
func secretNameFor(slot, secret string) string {
	if secret == "" || secret == slot {
		return ""
	}
	return secret
}

// boundSecret is the Secret a granted slot mounts.
func boundSecret(s plugins.SecretGrant) string {
	if s.SecretName == "" {
		return s.Name
	}
	return s.SecretName
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// newApproveCommand builds `openfief plugin approve`: show what a plugin asks
// for beyond its grant and, on confirmation, add it to the PluginGrant (D-16).
func newApproveCommand(env *Env) *cobra.Command {
	var (
		sel selection
		yes bool
	)
	cmd := &cobra.Command{
		Use:   "approve NAME [--yes] [--host H]... [--secret SLOT[=SECRET]]... [--capability C]... [--data-tier T]...",
		Short: "Approve what a plugin asks for beyond its grant",
		Long: `Show what the Plugin NAME requests (spec.manifest, the image's signed label)
that its PluginGrant does not hold yet, and on confirmation create or update the
PluginGrant NAME to hold it. The operator runs a plugin only with what both
hold (D-16); approving more than requested is refused, since it adds nothing.

Without --host, --secret, --capability or --data-tier everything pending is
approved; with them, only the named parts (the rest stays pending).
--secret SLOT=SECRET binds the manifest's Secret slot to a Secret of your
choosing, so two instances of one image can read two accounts; unbound, the
Secret named like the slot is mounted. On a slot already granted it rebinds it.
With --all, everything pending is approved and the --secret bindings apply.

It asks for confirmation on standard input unless --yes is given; when
standard input is not a terminal, --yes is required. Nothing pending exits
with code 10.`,
		Example: `  # See what is pending and approve all of it
  openfief plugin approve nbp-fx

  # Approve only one new host, without a prompt
  openfief plugin approve nbp-fx --host api.nbp.pl --yes

  # Approve everything, mounting the Secret ibkr-account-2 for the slot ibkr-flex-credentials
  openfief plugin approve ibkr-2 --all --secret ibkr-flex-credentials=ibkr-account-2`,
		Args: exactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if sel.all && (len(sel.capabilities) > 0 || len(sel.hosts) > 0 || len(sel.tiers) > 0) {
				return usageError(fmt.Errorf("--all approves everything pending; combine it only with --secret"))
			}
			ctx := cmd.Context()
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
			a, err := planApproval(name, m, grantFromAPI(g), sel)
			if err != nil {
				if ExitCode(err) == ExitNothingToDo {
					fmt.Fprintf(env.Out, "Plugin %s: nothing pending approval.\n", name)
				}
				return err
			}
			fmt.Fprintf(env.Out, "Plugin %s (image %s) asks for what its grant does not hold:\n", name, shortImage(p.Spec.Image))
			if a.pending.IsEmpty() {
				fmt.Fprintln(env.Out, "  nothing")
			}
			describePending(env.Out, "  ", a.pending, m)
			warnSignature(env.ErrOut, p)
			fmt.Fprintln(env.Out, "This approves:")
			describeApproval(env.Out, "  ", a, m)
			if left := remaining(a.pending, a.approved); !left.IsEmpty() {
				fmt.Fprintln(env.Out, "Still pending afterwards:")
				describePending(env.Out, "  ", left, m)
			}
			if err := env.confirm(ctx, yes, fmt.Sprintf("Approve this for plugin %s?", name), "approving plugin "+name); err != nil {
				return err
			}
			verb := "configured"
			if g == nil {
				g = &v1alpha1.PluginGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: env.Namespace}, Spec: apiconv.GrantToAPI(a.grant)}
				err, verb = c.Create(ctx, g, fieldOwner), "created"
			} else {
				g.Spec = apiconv.GrantToAPI(a.grant)
				err = c.Update(ctx, g, fieldOwner)
			}
			if err != nil {
				return writeError("writing plugingrant "+name, err)
			}
			fmt.Fprintf(env.Out, "plugingrant/%s %s\n", name, verb)
			return nil
		}),
	}
	f := cmd.Flags()
	f.BoolVarP(&yes, "yes", "y", false, "approve without asking")
	f.BoolVar(&sel.all, "all", false, "approve everything pending, even with --secret bindings")
	f.StringArrayVar(&sel.hosts, "host", nil, "approve only this egress host, host or host:port (repeatable)")
	f.StringArrayVar(&sel.secrets, "secret", nil, "approve only this Secret slot, optionally bound to a Secret: SLOT or SLOT=SECRET (repeatable)")
	f.StringArrayVar(&sel.capabilities, "capability", nil, "approve only this capability: connector or view (repeatable)")
	f.StringArrayVar(&sel.tiers, "data-tier", nil, "approve only this data tier (repeatable)")
	return cmd
}

// describeApproval lists what an approval adds, with each Secret slot's
// Secret, and the slots it rebinds.
func describeApproval(w io.Writer, indent string, a approval, m plugins.Manifest) {
	mounts := map[string]string{}
	for _, s := range m.Secrets {
		mounts[s.Name] = s.MountPath
	}
	shown := a.approved
	shown.Secrets = nil
	describePending(w, indent, shown, m)
	for _, slot := range a.approved.Secrets {
		secret := a.bindings[slot]
		if secret == "" {
			secret = slot
		}
		fmt.Fprintf(w, "%sSecret slot:   %s at %s, mounting Secret %s\n", indent, slot, mounts[slot], secret)
	}
	for _, slot := range a.rebound {
		fmt.Fprintf(w, "%sRebind:        slot %s to Secret %s\n", indent, slot, a.bindings[slot])
	}
}

// remaining is what stays pending after approved is granted.
func remaining(pending, approved plugins.Pending) plugins.Pending {
	minus := func(a, b []string) []string {
		var out []string
		for _, x := range a {
			if !slices.Contains(b, x) {
				out = append(out, x)
			}
		}
		return out
	}
	var caps []plugins.Capability
	for _, c := range pending.Capabilities {
		if !slices.Contains(approved.Capabilities, c) {
			caps = append(caps, c)
		}
	}
	return plugins.Pending{
		Capabilities: caps,
		Egress:       minus(pending.Egress, approved.Egress),
		Secrets:      minus(pending.Secrets, approved.Secrets),
		DataTiers:    minus(pending.DataTiers, approved.DataTiers),
	}
}

// warnSignature warns when the operator found the current image's
// signature not verified: approving then changes nothing until it is.
func warnSignature(w io.Writer, p *v1alpha1.Plugin) {
	cond := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionSignatureVerified)
	if cond == nil || cond.Status == metav1.ConditionTrue || p.Status.ObservedGeneration != p.Generation {
		return
	}
	fmt.Fprintf(w, "Warning: the operator has not verified this image (%s: %s); it will not run until it does.\n", cond.Reason, cond.Message)
}

// newRevokeCommand builds `openfief plugin revoke`: delete the PluginGrant,
// which revokes everything at once.
func newRevokeCommand(env *Env) *cobra.Command {
	var yes bool
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
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			name := args[0]
			ctx := cmd.Context()
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
			if err := env.confirm(ctx, yes, fmt.Sprintf("Revoke everything granted to plugin %s?", name), "revoking the grant of plugin "+name); err != nil {
				return err
			}
			if err := c.Delete(ctx, g, client.Preconditions{UID: &g.UID, ResourceVersion: &g.ResourceVersion}); err != nil {
				return writeError("deleting plugingrant "+name, err)
			}
			fmt.Fprintf(env.Out, "plugingrant/%s deleted; plugin %s now runs nothing\n", name, name)
			return nil
		}),
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "revoke without asking")
	return cmd
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
	fmt.Fprintf(w, "%sCapabilities:  %s\n", indent, orNone(sorted(caps)))
	fmt.Fprintf(w, "%sEgress:        %s\n", indent, orNone(canonical(hosts)))
	fmt.Fprintf(w, "%sSecrets:       %s\n", indent, orNone(sorted(secrets)))
	fmt.Fprintf(w, "%sData tiers:    %s\n", indent, orNone(sorted(tiers)))
}
