package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/configschema"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
	imagetrust "github.com/arkadiuss/openfief/internal/trust"
)

// installOptions are `openfief plugin install`'s flags and argument.
type installOptions struct {
	env          *Env
	trust        trustFlags
	image        string
	catalogEntry string
	configFile   string

	// name is the argument NAME.
	name string
	// ref is --image, parsed by Validate; for --catalog Run takes it from
	// the entry.
	ref plugins.ImageRef
}

// newInstallCommand builds `openfief plugin install`: verify the image,
// check the config against its signed schema, then create the Plugin with
// the signed label as spec.manifest (D-42, D-57).
func newInstallCommand(env *Env) *cobra.Command {
	o := &installOptions{env: env}
	cmd := &cobra.Command{
		Use:   "install NAME (--image IMAGE | --catalog ENTRY) [--config FILE]",
		Short: "Install a plugin instance from a signed image or from the catalog",
		Long: `Create the Plugin NAME from IMAGE (repository@sha256:<hex>), or from the image
the catalog pins for ENTRY (--catalog; 'openfief catalog list' shows them), which
must then be Verified: signed by the publisher the catalog names for it.

Before anything is written, the image is checked as the operator checks it
(refused unless a trusted signer signed it), its signed manifest label is read,
and the config (--config, JSON or YAML; {} when not given) is validated
against the label's config schema. The Plugin's spec.manifest is then exactly
the signed label, so the operator's check that they match holds.

The trusted signers are OpenFief's CI, the embedded catalog's publishers and
the owner's signers: from --signers, else from the cluster's
openfief-trusted-signers ConfigMap, which the operator reads too.

NAME names the instance (a DNS label of at most 56 characters starting with a
letter); one image may be installed under several names. The plugin runs
nothing until you approve what it asks for with 'openfief plugin approve'.
An existing NAME is refused: use 'openfief plugin upgrade' to change it.`,
		Example: `  openfief plugin install fx --catalog nbp-fx
  openfief plugin install nbp-fx --image ghcr.io/example/nbp-fx@sha256:<hex>
  openfief plugin install ibkr-main --image ghcr.io/example/ibkr-flex@sha256:<hex> --config ibkr-main.yaml`,
		Args: exactArgs(1),
		RunE: runOptions(o),
	}
	f := cmd.Flags()
	f.StringVar(&o.image, "image", "", "the plugin image, pinned by digest: repository@sha256:<hex> (this or --catalog)")
	f.StringVar(&o.catalogEntry, "catalog", "", "the catalog entry to install: its pinned image, which must be Verified (this or --image; openfief catalog list)")
	f.StringVar(&o.configFile, "config", "", "the instance's config, a JSON or YAML object checked against the manifest's config schema")
	o.trust.register(f, true)
	return cmd
}

// Complete takes NAME.
func (o *installOptions) Complete(args []string) error {
	o.name = args[0]
	return nil
}

// Validate refuses an invalid NAME, both or neither of --image and
// --catalog, and an --image not pinned by digest.
func (o *installOptions) Validate() error {
	if err := plugins.ValidateName(o.name); err != nil {
		return exitf(ExitInvalid, "NAME: %w", err)
	}
	if (o.image == "") == (o.catalogEntry == "") {
		return exitf(ExitUsage, "give exactly one of --image IMAGE and --catalog ENTRY")
	}
	if o.image != "" {
		ref, err := parseImage("--image", o.image)
		if err != nil {
			return err
		}
		o.ref = ref
	}
	return nil
}

// Run reads the config, refuses a NAME already installed, checks the image
// (and, for --catalog, that the entry's publisher signed it) and the config,
// then creates the Plugin.
func (o *installOptions) Run(ctx context.Context) error {
	env := o.env
	var config json.RawMessage
	if o.configFile != "" {
		var err error
		if config, err = readConfig(o.configFile); err != nil {
			return err
		}
	}
	c, err := env.Client()
	if err != nil {
		return err
	}
	if err := o.refuseExisting(ctx, c); err != nil {
		return err
	}
	res, err := o.verify(ctx, c)
	if err != nil {
		return err
	}
	if err := checkPlugin(o.name, o.ref, *res.Manifest, config, o.configFile); err != nil {
		return err
	}
	p := &v1alpha1.Plugin{
		ObjectMeta: metav1.ObjectMeta{Name: o.name, Namespace: env.Namespace},
		Spec:       v1alpha1.PluginSpec{Image: o.ref.String(), Manifest: apiconv.ManifestToAPI(*res.Manifest), Config: configJSON(config)},
	}
	if err := c.Create(ctx, p, fieldOwner); err != nil {
		return writeError("creating plugin "+o.name, err)
	}
	fmt.Fprintf(env.Out, "plugin/%s created\n", o.name)
	if env.Namespace != plugins.Namespace {
		fmt.Fprintf(env.ErrOut, "Warning: the operator watches only namespace %s; nothing runs a Plugin in %s.\n", plugins.Namespace, env.Namespace)
	}
	return env.afterWrite(ctx, c, o.name, res)
}

// refuseExisting refuses a NAME that is installed already, pointing to
// upgrade.
func (o *installOptions) refuseExisting(ctx context.Context, c client.Client) error {
	existing, err := o.env.getPlugin(ctx, c, o.name)
	if err == nil {
		return exitf(ExitNothingToDo, "plugin %q already exists in namespace %q (image %s); to change its image run: openfief plugin upgrade %s --image IMAGE",
			o.name, o.env.Namespace, display.Text(existing.Spec.Image), o.name)
	}
	if ExitCode(err) != ExitNotFound {
		return err
	}
	return nil
}

// verify checks the image with the cluster's trust; for --catalog it takes
// the image the entry pins and requires the entry's publisher to have
// signed it.
func (o *installOptions) verify(ctx context.Context, c client.Client) (imageCheck, error) {
	t, err := o.env.trustForCluster(ctx, c, o.trust)
	if err != nil {
		return imageCheck{}, err
	}
	var entry *plugins.CatalogEntry
	if o.catalogEntry != "" {
		if entry, err = lookupCatalog(t, o.catalogEntry); err != nil {
			return imageCheck{}, err
		}
		o.ref = entry.Image
	}
	res, err := o.env.verifyWith(ctx, o.ref, t, o.trust)
	if err != nil {
		return imageCheck{}, err
	}
	if entry != nil {
		if err := checkCatalogTrust(o.env.Out, res, t, *entry); err != nil {
			return imageCheck{}, err
		}
	}
	return res, nil
}

// lookupCatalog finds the catalog entry named name in t's catalog.
func lookupCatalog(t trust, name string) (*plugins.CatalogEntry, error) {
	var names []string
	for _, e := range t.policy.Catalog().Entries() {
		if e.Name == name {
			return &e, nil
		}
		names = append(names, e.Name)
	}
	have := "it lists no plugin"
	if len(names) > 0 {
		have = "it lists " + strings.Join(names, ", ")
	}
	return nil, exitf(ExitNotFound, "--catalog %s: no such entry in %s: %s (openfief catalog list)", display.Text(name), display.Text(t.catalog), have)
}

// checkCatalogTrust refuses an image installed by catalog name unless it is
// Verified by the entry's publisher: the owner asked for the plugin the
// catalog vouches for, not for whatever a trusted signer signed.
func checkCatalogTrust(w io.Writer, res imageCheck, t trust, entry plugins.CatalogEntry) error {
	v := res.Verification
	if v.Reason == v1alpha1.ReasonVerified && res.Signer != nil && res.Signer.Name == entry.Publisher.Name {
		return nil
	}
	printCheck(w, res, t)
	return exitf(ExitUntrustedSigner, "--catalog %s: the image the catalog pins is %s, not Verified by %s, the publisher the catalog names: refused",
		display.Text(entry.Name), display.Text(v.Reason), display.Text(entry.Publisher.Name))
}

// upgradeOptions are `openfief plugin upgrade`'s flags and argument.
type upgradeOptions struct {
	env        *Env
	trust      trustFlags
	image      string
	configFile string

	// name is the argument NAME.
	name string
	// ref is --image, parsed by Validate.
	ref plugins.ImageRef
}

// newUpgradeCommand builds `openfief plugin upgrade`: move an installed
// plugin to another image, taking spec.manifest from the new image's signed
// label (D-47: upgrades happen only when the owner asks).
func newUpgradeCommand(env *Env) *cobra.Command {
	o := &upgradeOptions{env: env}
	cmd := &cobra.Command{
		Use:   "upgrade NAME --image IMAGE [--config FILE]",
		Short: "Move an installed plugin to another signed image",
		Long: `Point the Plugin NAME at IMAGE, with spec.manifest taken from the new image's
signed label. The image is checked as 'install' checks it, and the config
(--config, else the current one) is validated against the new config schema
before anything is written.

If the new version asks for more than the grant holds, the operator keeps the
previous version running with the current grant (RunningPreviousVersion) until
you approve the difference with 'openfief plugin approve NAME'.`,
		Example: `  openfief plugin upgrade nbp-fx --image ghcr.io/example/nbp-fx@sha256:<new hex>
  openfief plugin upgrade ibkr-main --image ghcr.io/example/ibkr-flex@sha256:<hex> --config ibkr-main.yaml`,
		Args: exactArgs(1),
		RunE: runOptions(o),
	}
	f := cmd.Flags()
	f.StringVar(&o.image, "image", "", "the new image, pinned by digest: repository@sha256:<hex> (required)")
	f.StringVar(&o.configFile, "config", "", "a new config, a JSON or YAML object (default: keep the current one)")
	o.trust.register(f, true)
	_ = cmd.MarkFlagRequired("image")
	return cmd
}

// Complete takes NAME.
func (o *upgradeOptions) Complete(args []string) error {
	o.name = args[0]
	return nil
}

// Validate refuses an --image not pinned by digest.
func (o *upgradeOptions) Validate() error {
	ref, err := parseImage("--image", o.image)
	if err != nil {
		return err
	}
	o.ref = ref
	return nil
}

// Run checks the new image and the config (--config, else the current
// one), refuses an upgrade that changes nothing, then updates the Plugin.
func (o *upgradeOptions) Run(ctx context.Context) error {
	env, name, ref := o.env, o.name, o.ref
	c, err := env.Client()
	if err != nil {
		return err
	}
	p, err := env.getPlugin(ctx, c, name)
	if err != nil {
		return err
	}
	config := apiconv.RawJSON(p.Spec.Config)
	if o.configFile != "" {
		if config, err = readConfig(o.configFile); err != nil {
			return err
		}
	}
	res, err := env.verifyForCluster(ctx, c, ref, o.trust)
	if err != nil {
		return err
	}
	if err := checkPlugin(name, ref, *res.Manifest, config, o.configFile); err != nil {
		return err
	}
	manifest := apiconv.ManifestToAPI(*res.Manifest)
	if p.Spec.Image == ref.String() && apiconv.ManifestFromAPI(p.Spec.Manifest).Equal(*res.Manifest) &&
		bytes.Equal(apiconv.RawJSON(p.Spec.Config), config) {
		return exitf(ExitNothingToDo, "plugin %q already has image %s and this config", name, ref)
	}
	previous := p.Spec.Image
	err = updateSpec(ctx, c, p, func(p *v1alpha1.Plugin) any { return p.Spec }, func(p *v1alpha1.Plugin) {
		p.Spec.Image, p.Spec.Manifest, p.Spec.Config = ref.String(), manifest, configJSON(config)
	})
	if err != nil {
		return writeError("upgrading plugin "+name, err)
	}
	fmt.Fprintf(env.Out, "plugin/%s upgraded: %s -> %s\n", name, shortImage(previous), shortImage(ref.String()))
	return env.afterWrite(ctx, c, name, res)
}

// verifyForCluster checks ref with the trust the operator of this cluster
// holds (or --signers), printing the full report only on refusal.
func (e *Env) verifyForCluster(ctx context.Context, c client.Client, ref plugins.ImageRef, tf trustFlags) (imageCheck, error) {
	t, err := e.trustForCluster(ctx, c, tf)
	if err != nil {
		return imageCheck{}, err
	}
	return e.verifyWith(ctx, ref, t, tf)
}

// trustForCluster is the trust policy the commands that write to the
// cluster check with: the owner's signers of --signers, else the cluster's,
// and the catalog of --catalog-file (verified), else this binary's.
func (e *Env) trustForCluster(ctx context.Context, c client.Client, tf trustFlags) (trust, error) {
	if tf.signersFile != "" {
		return e.policyFromFile(tf.signersFile, tf.catalogFile)
	}
	return e.policyFromCluster(ctx, c, tf.catalogFile)
}

// verifyWith checks ref with t as verifyForCluster does.
func (e *Env) verifyWith(ctx context.Context, ref plugins.ImageRef, t trust, tf trustFlags) (imageCheck, error) {
	res, err := e.checkImage(ctx, ref, t, tf)
	if err != nil {
		return imageCheck{}, err
	}
	if err := res.refusal(); err != nil {
		printCheck(e.Out, res, t)
		return imageCheck{}, err
	}
	return res, nil
}

// checkPlugin refuses, before anything is written, a config that does not
// match the signed schema and any plugin the domain would not accept.
func checkPlugin(name string, ref plugins.ImageRef, m plugins.Manifest, config json.RawMessage, configFile string) error {
	source := "--config " + configFile
	if configFile == "" {
		source = "config (none given, so {})"
	}
	return checkPluginAs(name, ref, m, config, source)
}

// checkPluginAs is checkPlugin with the config's source named as source.
func checkPluginAs(name string, ref plugins.ImageRef, m plugins.Manifest, config json.RawMessage, source string) error {
	if err := configschema.Validate(m.ConfigSchema, config); err != nil {
		return exitf(ExitInvalid, "%s does not match the manifest's configSchema: %w", source, err)
	}
	p := plugins.Plugin{Name: name, Image: ref.String(), Manifest: m, Config: config}
	if err := p.Validate(); err != nil {
		return exitf(ExitInvalid, "plugin %s: %w", name, err)
	}
	return nil
}

// afterWrite tells the owner how the image was trusted and what the new
// spec waits for.
func (e *Env) afterWrite(ctx context.Context, c client.Client, name string, res imageCheck) error {
	g, err := e.getGrant(ctx, c, name)
	if err != nil {
		return err
	}
	printWritten(e.Out, res.Verification, *res.Manifest, grantFromAPI(g), e.ApproveCommand(name))
	return nil
}

// printWritten writes what install and upgrade report after the write: how
// the image was trusted and what the manifest asks for beyond the grant g (nil: none).
// It depends on plain values only, so the consent test renders it exactly
// as the commands do.
func printWritten(w io.Writer, v imagetrust.Verification, m plugins.Manifest, g *plugins.Grant, approveCommand string) {
	fmt.Fprintf(w, "Signature:  %s by %s\n", display.Text(v.Reason), display.Text(v.Signer))
	defer printOwnerSlots(w, m, g, approveCommand)
	pending := plugins.NeedsApproval(m, g)
	if pending.IsEmpty() {
		fmt.Fprintln(w, "Approval:   nothing pending; the grant holds everything it asks for")
		return
	}
	fmt.Fprintln(w, "Pending approval (requested, not granted):")
	describePending(w, "  ", pending, m)
	fmt.Fprintf(w, "Approve with: %s\n", approveCommand)
}

// printOwnerSlots tells the owner about the manifest's slots for hosts of
// their choosing (OF-36): how to fill a free one, or that the grant lists
// more of them than this version allows, so it does not run.
func printOwnerSlots(w io.Writer, m plugins.Manifest, g *plugins.Grant, approveCommand string) {
	if own := plugins.OwnerHosts(m, g); len(own) > 0 {
		fmt.Fprintf(w, "Your hosts: %s (%d of %d slots used)\n", display.Join(own, ", "), len(own), m.OwnerSlots())
	}
	warnOwnerHosts(w, "", m, g)
	if free := plugins.FreeOwnerSlots(m, g); free > 0 {
		fmt.Fprintf(w, "It may also reach %d host(s) of your choosing, such as your own server; add one with: %s --host HOST\n", free, approveCommand)
	}
}

// configJSON wraps a config for spec.config; nil stays unset ({}).
func configJSON(config json.RawMessage) *apiextensionsv1.JSON {
	if len(config) == 0 {
		return nil
	}
	return &apiextensionsv1.JSON{Raw: config}
}
