package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// rollbackOptions are `openfief plugin rollback`'s flags and argument.
type rollbackOptions struct {
	env   *Env
	trust trustFlags
	// toText is --to as given, "" for the previous revision.
	toText string

	// name is the argument NAME.
	name string
	// to is --to, parsed by Validate; 0 for the previous revision.
	to int64
}

// newRollbackCommand builds `openfief plugin rollback`: point the Plugin
// back at the image of a revision in its history. It is an upgrade to an
// older image: verified again now, its manifest taken from its signed label,
// approved under the grant as it stands (D-47).
func newRollbackCommand(env *Env) *cobra.Command {
	o := &rollbackOptions{env: env}
	cmd := &cobra.Command{
		Use:   "rollback NAME [--to REVISION]",
		Short: "Return a plugin to a version it ran before",
		Long: `Point the Plugin NAME back at the image of one of its revisions ('openfief
plugin history NAME' lists them): by default the previous one, the newest
revision whose image is not the one the Plugin asks for now (the one before
the running one, or, while an upgrade waits for approval or is refused, the
one that runs); with --to, that revision.

It is an upgrade to the older image: the image is verified again now, with the
trust the operator holds now (a version whose signer you no longer trust is
refused, and nothing is written), spec.manifest is taken from its signed label,
and the current config is validated against that label's config schema. The
operator then verifies it again and runs it under the grant as it stands: if
that version asks for more than the grant holds, the running version keeps
running (RunningPreviousVersion) until you approve the difference with
'openfief plugin approve NAME'. Once it runs, the operator records it as a new
revision and records a RolledBack Event.`,
		Example: `  openfief plugin rollback nbp-fx
  openfief plugin rollback nbp-fx --to 3`,
		Args: exactArgs(1),
		RunE: runOptions(o),
	}
	f := cmd.Flags()
	f.StringVar(&o.toText, "to", "", "the revision to return to, a number from 'openfief plugin history NAME' (default: the previous one)")
	o.trust.register(f, true)
	return cmd
}

// Complete takes NAME.
func (o *rollbackOptions) Complete(args []string) error {
	o.name = args[0]
	return nil
}

// Validate refuses a --to that is no revision number.
func (o *rollbackOptions) Validate() error {
	if o.toText == "" {
		o.to = 0
		return nil
	}
	n, err := strconv.ParseInt(o.toText, 10, 64)
	if err != nil || n < 1 {
		return usageError(fmt.Errorf("--to %s: want a revision number, 1 or more, from 'openfief plugin history %s'", display.Text(strconv.Quote(o.toText)), o.name))
	}
	o.to = n
	return nil
}

// Run picks the revision, verifies its image with the cluster's trust,
// checks the current config against its signed schema, then points the
// Plugin at it.
func (o *rollbackOptions) Run(ctx context.Context) error {
	env, name := o.env, o.name
	c, err := env.Client()
	if err != nil {
		return err
	}
	p, err := env.getPlugin(ctx, c, name)
	if err != nil {
		return err
	}
	target, err := pickRevision(p, o.to)
	if err != nil {
		return err
	}
	ref, err := plugins.ParseImageRef(target.Image)
	if err != nil {
		return exitf(ExitInvalidImage, "revision %d of plugin %s: image %s: %w", target.Revision, name, display.Text(target.Image), err)
	}
	res, err := env.verifyForCluster(ctx, c, ref, o.trust)
	if err != nil {
		return err
	}
	if d := target.ManifestDigest; d != "" && d != plugins.ManifestDigest(*res.Manifest) {
		return exitf(ExitManifestMismatch, "revision %d of plugin %s: the signed manifest of %s is not the one the history records (manifestDigest %s): refused",
			target.Revision, name, shortImage(target.Image), display.Text(d))
	}
	config := apiconv.RawJSON(p.Spec.Config)
	if err := checkPluginAs(name, ref, *res.Manifest, config, "the current config"); err != nil {
		return exitf(ExitCode(err), "%w; to roll back with another config run: openfief plugin upgrade %s --image %s --config FILE", err, name, ref)
	}
	if p.Spec.Image == ref.String() && apiconv.ManifestFromAPI(p.Spec.Manifest).Equal(*res.Manifest) {
		return exitf(ExitNothingToDo, "plugin %q already asks for revision %d's image %s (see: openfief plugin status %s)", name, target.Revision, shortImage(ref.String()), name)
	}
	previous := p.Spec.Image
	manifest := apiconv.ManifestToAPI(*res.Manifest)
	err = updateSpec(ctx, c, p, func(p *v1alpha1.Plugin) any { return p.Spec }, func(p *v1alpha1.Plugin) {
		p.Spec.Image, p.Spec.Manifest = ref.String(), manifest
	})
	if err != nil {
		return writeError("rolling back plugin "+name, err)
	}
	fmt.Fprintf(env.Out, "plugin/%s rolled back to revision %d: %s -> %s\n", name, target.Revision, shortImage(previous), shortImage(ref.String()))
	return env.afterWrite(ctx, c, name, res)
}

// pickRevision is the revision of p's history that rollback returns to:
// revision to, or with to 0 the previous one, the newest whose image is not
// the one the spec asks for: the revision before the newest, or, while an
// upgrade waits for approval or is refused, the newest (which runs). An
// unknown revision names --to and the revisions there are.
func pickRevision(p *v1alpha1.Plugin, to int64) (v1alpha1.PluginRevision, error) {
	h := historyOf(p).Items
	if to == 0 {
		for _, it := range h {
			if it.Image != p.Spec.Image {
				return it.PluginRevision, nil
			}
		}
		return v1alpha1.PluginRevision{}, exitf(ExitNotFound, "plugin %s has no previous revision to roll back to: %s (see: openfief plugin history %s)",
			p.Name, describeRevisions(h), p.Name)
	}
	for _, it := range h {
		if it.Revision == to {
			return it.PluginRevision, nil
		}
	}
	return v1alpha1.PluginRevision{}, exitf(ExitNotFound, "--to %d: plugin %s has no revision %d: %s (see: openfief plugin history %s)",
		to, p.Name, to, describeRevisions(h), p.Name)
}

// describeRevisions says which revisions a history holds.
func describeRevisions(h []historyItem) string {
	if len(h) == 0 {
		return "its history is empty (no version has run yet)"
	}
	nums := make([]string, len(h))
	for i, it := range h {
		nums[i] = strconv.FormatInt(it.Revision, 10)
	}
	if len(h) == 1 {
		return "its history holds only revision " + nums[0]
	}
	return "its history holds revisions " + strings.Join(nums, ", ")
}
