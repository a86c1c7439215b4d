package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/platform"
)

// defaultPlatformTimeout bounds an install, upgrade or uninstall unless
// --timeout says otherwise.
const defaultPlatformTimeout = 5 * time.Minute

// newPlatformCommand builds `openfief platform`: install, upgrade,
// uninstall and status of the platform itself (OF-23), for the cluster
// admin.
func newPlatformCommand(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "platform",
		Short: "Install, upgrade, inspect or remove the OpenFief platform (cluster admin)",
		Long: `Install, upgrade, inspect or remove the platform itself: the CRDs and the
openfief namespace, the admission policy, the operator, the egress proxy and
openfief-core, from a release overlay (make release-overlay). Objects are
server-side applied with the field manager openfief-platform and labelled
app.kubernetes.io/managed-by=openfief-platform; upgrade prunes and uninstall
removes only objects with that label. openfief-core runs as one replica on
SQLite (deploy/core as committed); several replicas need PostgreSQL
(deploy/core/components/postgres-replicas), and an overlay with several on
SQLite is refused.`,
		Example: `  # Install from a release overlay (make release-overlay), then check it
  openfief platform install --overlay release
  openfief platform status`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newPlatformApplyCommand(env, false), newPlatformApplyCommand(env, true),
		newPlatformUninstallCommand(env), newPlatformStatusCommand(env))
	return cmd
}

// platformApplyOptions are the flags of `openfief platform install` and
// `openfief platform upgrade`.
type platformApplyOptions struct {
	env *Env
	// upgrade says the command is upgrade, not install.
	upgrade        bool
	overlay        string
	apiServerCIDRs []string
	dryRun         bool
	timeout        time.Duration
	allowDowngrade bool

	// cidrs are --api-server-cidr, checked and normalised by Validate.
	cidrs []string
}

// newPlatformApplyCommand builds `openfief platform install` or, with
// upgrade, `openfief platform upgrade`.
func newPlatformApplyCommand(env *Env, upgrade bool) *cobra.Command {
	o := &platformApplyOptions{env: env, upgrade: upgrade}
	use, short := "install", "Install the platform from a release overlay and wait until it is Available"
	example := `  # See what would be applied, then apply it and wait up to 3 minutes
  openfief platform install --overlay release --dry-run > platform.yaml
  openfief platform install --overlay release --timeout 3m

  # Name the API server yourself instead of reading the kubernetes EndpointSlice
  openfief platform install --overlay release --api-server-cidr 10.0.0.2/32`
	if upgrade {
		use, short = "upgrade", "Apply a newer release overlay, prune what it no longer holds, wait until Available"
		example = `  # Upgrade, or roll back to an older overlay on purpose
  openfief platform upgrade --overlay release-next
  openfief platform upgrade --overlay release-previous --allow-downgrade`
	}
	cmd := &cobra.Command{
		Use:     use + " --overlay DIR",
		Short:   short,
		Example: example,
		Args:    exactArgs(0),
		RunE:    runOptions(o),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.overlay, "overlay", "", "the release overlay: a kustomization directory (make release-overlay writes one)")
	fl.StringSliceVar(&o.apiServerCIDRs, "api-server-cidr", nil, "the API server's addresses for the core's NetworkPolicy, IPs or CIDRs, repeatable (default: the addresses of the EndpointSlices of default/kubernetes)")
	fl.BoolVar(&o.dryRun, "dry-run", false, "print the objects as YAML and apply nothing")
	fl.DurationVar(&o.timeout, "timeout", defaultPlatformTimeout, "how long to wait for the CRDs and every Deployment")
	if upgrade {
		fl.BoolVar(&o.allowDowngrade, "allow-downgrade", false, "apply an overlay older than the installed version (a rollback)")
	}
	_ = cmd.MarkFlagRequired("overlay")
	return cmd
}

// Complete has nothing to fill: install and upgrade take no argument.
func (o *platformApplyOptions) Complete([]string) error { return nil }

// Validate refuses a --timeout that is not positive and an
// --api-server-cidr that is not an IP or CIDR.
func (o *platformApplyOptions) Validate() error {
	if o.timeout <= 0 {
		return exitf(ExitUsage, "--timeout must be positive")
	}
	if len(o.apiServerCIDRs) > 0 {
		cidrs, err := deploy.APIServerCIDRs(o.apiServerCIDRs)
		if err != nil {
			return exitf(ExitUsage, "--api-server-cidr: %w", err)
		}
		o.cidrs = cidrs
	}
	return nil
}

// Run loads the overlay and names the API server in it; an install's dry
// run prints it without reading the cluster. Otherwise it checks what is
// installed, then prints (--dry-run) or applies.
func (o *platformApplyOptions) Run(ctx context.Context) error {
	e := o.env
	set, err := platform.Load(o.overlay)
	if err != nil {
		return exitf(ExitInvalid, "%w", err)
	}
	if err := checkCoreReplicas(set.Objects); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	var c client.Client
	connect := func() error {
		if c != nil {
			return nil
		}
		var err error
		c, err = e.Client()
		return err
	}
	if err := e.fillAPIServer(ctx, set, o.cidrs, connect, &c); err != nil {
		return err
	}
	if o.dryRun && !o.upgrade {
		return set.WriteYAML(e.Out)
	}
	if err := connect(); err != nil {
		return err
	}
	owned, installed, err := o.checkInstalled(ctx, c, set)
	if err != nil {
		return err
	}
	if o.dryRun {
		return o.printDryRun(set, owned)
	}
	return o.apply(ctx, c, set, owned, installed)
}

// checkInstalled reads the platform's objects and refuses an install over
// an installed platform, an upgrade of none, and a downgrade without
// --allow-downgrade. It returns the objects and the installed version.
func (o *platformApplyOptions) checkInstalled(ctx context.Context, c client.Client, set *platform.Set) ([]*unstructured.Unstructured, string, error) {
	owned, err := platform.Owned(ctx, c)
	if err != nil {
		return nil, "", err
	}
	installed := platform.InstalledVersion(owned)
	switch {
	case !o.upgrade && platform.Installed(owned):
		return nil, "", exitf(ExitNothingToDo, "the platform is already installed (version %s): use openfief platform upgrade", display.Text(installed))
	case o.upgrade && !platform.Installed(owned):
		return nil, "", exitf(ExitNotFound, "%w: use openfief platform install", platform.ErrNotInstalled)
	case o.upgrade:
		if err := platform.CheckUpgrade(installed, set.Version, o.allowDowngrade); err != nil {
			return nil, "", exitf(ExitInvalid, "%w", err)
		}
		if err := o.checkCoreSchema(owned, set); err != nil {
			return nil, "", err
		}
	}
	return owned, installed, nil
}

// checkCoreSchema refuses an overlay whose core knows fewer schema versions
// than the installed core, whatever the versions and --allow-downgrade say:
// that core would refuse the record. When either side does not say (a
// release made before the annotation), it says on ErrOut what cannot be
// checked, on a downgrade, and lets the move go on.
func (o *platformApplyOptions) checkCoreSchema(owned []*unstructured.Unstructured, set *platform.Set) error {
	installed, okInstalled, err := platform.CoreSchema(owned)
	if err != nil {
		return exitf(ExitInvalid, "the installed platform: %w", err)
	}
	next, okNext, err := platform.CoreSchema(set.Objects)
	if err != nil {
		return exitf(ExitInvalid, "the overlay: %w", err)
	}
	switch {
	case okInstalled && okNext:
		if err := platform.CheckCoreSchema(installed, next, set.Version); err != nil {
			return exitf(ExitInvalid, "%w", err)
		}
	case o.allowDowngrade:
		fmt.Fprintf(o.env.ErrOut, "warning: cannot tell whether the core of %s knows the installed record's schema (a release without the %s annotation): if it does not, it will refuse the record and stop\n",
			display.Text(set.Version), deploy.CoreSchemaAnnotation)
	}
	return nil
}

// printDryRun is an upgrade's --dry-run: the objects as YAML on Out, and on
// ErrOut what the upgrade would prune and keep.
func (o *platformApplyOptions) printDryRun(set *platform.Set, owned []*unstructured.Unstructured) error {
	e := o.env
	if err := set.WriteYAML(e.Out); err != nil {
		return err
	}
	prune, keep := platform.Stale(set, owned)
	for _, u := range prune {
		fmt.Fprintf(e.ErrOut, "would prune %s %s\n", u.GetKind(), display.Text(u.GetName()))
	}
	for _, u := range keep {
		fmt.Fprintf(e.ErrOut, "would keep %s %s (data)\n", u.GetKind(), display.Text(u.GetName()))
	}
	return nil
}

// apply applies set, waits until it is Available and the operator has
// published what it writes at start and, on upgrade, prunes what the
// overlay no longer holds.
func (o *platformApplyOptions) apply(ctx context.Context, c client.Client, set *platform.Set, owned []*unstructured.Unstructured, installed string) error {
	e := o.env
	if o.upgrade {
		fmt.Fprintf(e.Out, "upgrading the platform from %s to %s\n", display.Text(installed), set.Version)
	} else {
		fmt.Fprintf(e.Out, "installing the platform, version %s\n", set.Version)
	}
	if err := platform.Apply(ctx, c, set, e.Out); err != nil {
		return err
	}
	e.warnMissingSecrets(ctx, c, set)
	if err := platform.WaitAvailable(ctx, c, set, e.Out); err != nil {
		return err
	}
	if err := platform.WaitPublished(ctx, c, set, e.Out); err != nil {
		return err
	}
	if o.upgrade {
		if err := platform.Prune(ctx, c, set, owned, e.Out); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.Out, "the platform %s is Available\n", set.Version)
	if line := coreReplicasLine(set.Objects); line != "" {
		fmt.Fprintln(e.Out, line)
	}
	return nil
}

// fillAPIServer names the API server in the core's NetworkPolicy: the
// --api-server-cidr addresses, else those of the cluster's EndpointSlices,
// unless the overlay already named them. It says what it chose on ErrOut
// (stdout stays YAML in a dry run).
func (e *Env) fillAPIServer(ctx context.Context, set *platform.Set, cidrs []string, connect func() error, c *client.Client) error {
	if !set.HasAPIServerPlaceholder() {
		if len(cidrs) > 0 {
			return exitf(ExitUsage, "--api-server-cidr: the overlay already names the API server in NetworkPolicy %s (no %s left): drop the flag, or the overlay's patch", deploy.CoreNetworkPolicy, deploy.APIServerPlaceholder)
		}
		fmt.Fprintf(e.ErrOut, "API server: kept the addresses the overlay names in NetworkPolicy %s\n", deploy.CoreNetworkPolicy)
		return nil
	}
	source := "--api-server-cidr"
	if len(cidrs) == 0 {
		if err := connect(); err != nil {
			return err
		}
		var err error
		if cidrs, err = platform.DiscoverAPIServer(ctx, *c); err != nil {
			return err
		}
		source = platform.APIServerSource
	}
	if _, err := set.SetAPIServer(cidrs); err != nil {
		return err
	}
	fmt.Fprintf(e.ErrOut, "API server: %s (from %s), in NetworkPolicy %s in place of %s\n",
		display.Text(strings.Join(cidrs, ", ")), source, deploy.CoreNetworkPolicy, deploy.APIServerPlaceholder)
	return nil
}

// warnMissingSecrets says which Secret a platform pod mounts that does not
// exist yet (openfief-registry-config with the registry-config component):
// the pod cannot start until it does. It reads only the Secret's metadata.
func (e *Env) warnMissingSecrets(ctx context.Context, c client.Client, set *platform.Set) {
	for _, d := range set.Deployments() {
		vols := objectList(d.Object, "spec", "template", "spec", "volumes")
		for _, v := range vols {
			sec, _ := v["secret"].(map[string]any)
			name, _ := sec["secretName"].(string)
			optional, _ := sec["optional"].(bool)
			if name == "" || optional {
				continue
			}
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
			err := c.Get(ctx, client.ObjectKey{Namespace: d.GetNamespace(), Name: name}, m)
			if apierrors.IsNotFound(err) {
				fmt.Fprintf(e.Out, "warning: Deployment %s mounts Secret %s/%s, which does not exist: its pods cannot start until you create it (docs/operator.md)\n",
					d.GetName(), d.GetNamespace(), name)
			}
		}
	}
}

// objectList is the list of JSON objects at path in obj.
func objectList(obj map[string]any, path ...string) []map[string]any {
	cur := any(obj)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	list, _ := cur.([]any)
	out := make([]map[string]any, 0, len(list))
	for _, v := range list {
		if m, ok := v.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// platformUninstallOptions are `openfief platform uninstall`'s flags.
type platformUninstallOptions struct {
	env     *Env
	opts    platform.UninstallOptions
	yes     bool
	timeout time.Duration
}

// newPlatformUninstallCommand builds `openfief platform uninstall`.
func newPlatformUninstallCommand(env *Env) *cobra.Command {
	o := &platformUninstallOptions{env: env}
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove the platform and every plugin workload; keep the owner's data unless --delete-data",
		Example: `  # Remove the platform; Plugins, PluginGrants and the core's database stay
  openfief platform uninstall --yes

  # Remove everything, the openfief namespace included
  openfief platform uninstall --yes --delete-data`,
		Args: exactArgs(0),
		RunE: runOptions(o),
	}
	cmd.Flags().BoolVar(&o.opts.DeleteData, "delete-data", false, "also delete the core's PersistentVolumeClaim, the CRDs with every Plugin and PluginGrant, and the openfief namespace")
	cmd.Flags().BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
	cmd.Flags().DurationVar(&o.timeout, "timeout", defaultPlatformTimeout, "how long to wait for pods and the namespace to go")
	return cmd
}

// Complete has nothing to fill: uninstall takes no argument.
func (o *platformUninstallOptions) Complete([]string) error { return nil }

// Validate refuses a --timeout that is not positive.
func (o *platformUninstallOptions) Validate() error {
	if o.timeout <= 0 {
		return exitf(ExitUsage, "--timeout must be positive")
	}
	return nil
}

// Run says what goes, asks, and removes the platform within --timeout.
func (o *platformUninstallOptions) Run(ctx context.Context) error {
	env := o.env
	c, err := env.Client()
	if err != nil {
		return err
	}
	what := "remove the platform and every plugin workload (Plugins, PluginGrants and the core's data are kept)"
	if o.opts.DeleteData {
		what = "remove the platform, every plugin workload, every Plugin and PluginGrant, the core's data and the openfief namespace"
	}
	if err := env.confirm(ctx, o.yes, what+"?", "uninstalling the platform"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := platform.Uninstall(ctx, c, o.opts, env.Out); err != nil {
		if errors.Is(err, platform.ErrNotInstalled) {
			return exitf(ExitNothingToDo, "%w", err)
		}
		return err
	}
	fmt.Fprintln(env.Out, "the platform is uninstalled")
	return nil
}

// platformStatusOptions are `openfief platform status`'s: it has no flag
// of its own.
type platformStatusOptions struct {
	env *Env
}

// newPlatformStatusCommand builds `openfief platform status`.
func newPlatformStatusCommand(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:     "status",
		Short:   "Show each platform component's image, version and availability, and the admission policy binding",
		Example: `  openfief platform status`,
		Args:    exactArgs(0),
		RunE:    runOptions(&platformStatusOptions{env: env}),
	}
}

// Complete has nothing to fill: status takes no argument.
func (o *platformStatusOptions) Complete([]string) error { return nil }

// Validate has nothing to refuse.
func (o *platformStatusOptions) Validate() error { return nil }

// Run reads the platform's status and prints it.
func (o *platformStatusOptions) Run(ctx context.Context) error {
	c, err := o.env.Client()
	if err != nil {
		return err
	}
	st, err := platform.ReadStatus(ctx, c)
	if errors.Is(err, platform.ErrNotInstalled) {
		return exitf(ExitNotFound, "%w", err)
	}
	if err != nil {
		return err
	}
	printPlatformStatus(o.env, st)
	return nil
}

// printPlatformStatus writes st as a table and a list of bindings; every
// value from the cluster is escaped.
func printPlatformStatus(env *Env, st platform.Status) {
	fmt.Fprintf(env.Out, "Version:  %s\n", display.Text(st.Version))
	tw := tabwriter.NewWriter(env.Out, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tAVAILABLE\tREADY\tVERSION\tIMAGE")
	for _, c := range st.Components {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", display.Text(c.Name), display.Text(c.Available), c.Ready, display.Text(c.Version), display.Text(c.Image))
	}
	_ = tw.Flush()
	if len(st.Bindings) == 0 {
		fmt.Fprintln(env.Out, "Admission: no policy binding of the platform: deploy/admission is not installed, nothing stops other identities from running pods as the platform's")
		return
	}
	fmt.Fprintln(env.Out, "Admission:")
	for _, b := range st.Bindings {
		state := "bound"
		if !b.PolicyFound {
			state = "policy missing"
		}
		fmt.Fprintf(env.Out, "  %s: policy %s, %s, %s\n", display.Text(b.Name), display.Text(b.Policy), display.Text(b.Actions), state)
	}
}
