package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// newCatalogCommand builds `openfief catalog` and its subcommands (D-43,
// D-44, OF-30).
func newCatalogCommand(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "List the plugins of the catalog, which OpenFief vouches for",
		Long: `The catalog lists first-party and verified plugins, each pinned to one image
digest and the publisher whose signature makes it Verified. A release
builds its catalog into its operator and into its openfief binary alike, so
the CLI of the installed release says Verified exactly when the operator
does; no cluster object is read for it. --catalog-file takes a release's
plugins.json instead, only with the signature the release wrote beside it
(plugins.json.sigstore.json) by OpenFief's CI or a publisher of this CLI's
own catalog. A development build's catalog lists no plugin.`,
		Example: `  openfief catalog list
  openfief plugin install fx --catalog nbp-fx`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCatalogListCommand(env))
	return cmd
}

// catalogRow is one catalog entry as `catalog list` shows it.
type catalogRow struct {
	Name      string `json:"name"`
	Publisher string `json:"publisher"`
	// Identity says how the publisher is identified: a public key, or an
	// OIDC issuer and subject.
	Identity string `json:"identity"`
	Image    string `json:"image"`
	// Status is the image's check with the catalog's policy: Verified, or
	// the reason it is not (SignedByTrustedSigner, UntrustedSigner,
	// RegistryUnavailable, ...).
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
	// Manifest is the image's signed label, read only from a Verified image.
	Manifest *plugins.Manifest `json:"manifest,omitempty"`
}

// catalogListing is `catalog list -o json`.
type catalogListing struct {
	// Source says where the catalog came from.
	Source string `json:"source"`
	// Version is the release the catalog is of: this CLI's, or the one a
	// signed catalog file names; empty for a development build.
	Version string       `json:"version,omitempty"`
	Plugins []catalogRow `json:"plugins"`
}

// catalogListOptions are `openfief catalog list`'s flags.
type catalogListOptions struct {
	env    *Env
	trust  trustFlags
	output string
}

// newCatalogListCommand builds `openfief catalog list`: the catalog's
// plugins, each image checked as the operator checks it.
func newCatalogListCommand(env *Env) *cobra.Command {
	o := &catalogListOptions{env: env}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the catalog's plugins, each checked as the operator checks it",
		Long: `List the catalog's plugins in the catalog's order:

  NAME       the catalog name: install it with 'openfief plugin install NAME --catalog ENTRY'
  PUBLISHER  whose signature makes it Verified
  VERSION    the release the catalog is of ("-" for a development build)
  STATUS     the image checked now with the catalog's policy: Verified, or why not
  ASKS FOR   what its signed manifest asks: capabilities, egress hosts, Secrets, data tiers
  IMAGE      the pinned image, its digest shortened to 12 hex digits

Each image is read from its registry and its signature verified offline, as
'openfief plugin verify' does; nothing is installed. -o json prints every
field, the signed manifests whole.`,
		Example: `  openfief catalog list
  openfief catalog list --catalog-file release/plugins.json -o json`,
		Args: exactArgs(0),
		RunE: runOptions(o),
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: json (default: a table)")
	o.trust.register(cmd.Flags(), true)
	return cmd
}

// Complete has nothing to fill: catalog list takes no argument.
func (o *catalogListOptions) Complete([]string) error { return nil }

// Validate refuses an --output other than json.
func (o *catalogListOptions) Validate() error {
	if o.output != outputTable && o.output != "json" {
		return exitf(ExitUsage, "--output %q: want json (default: a table)", o.output)
	}
	return nil
}

// Run checks every entry's image with the trust of --signers, else the
// cluster's, and prints the listing.
func (o *catalogListOptions) Run(ctx context.Context) error {
	env := o.env
	var (
		t   trust
		err error
	)
	if o.trust.signersFile != "" {
		t, err = env.policyFromFile(o.trust.signersFile, o.trust.catalogFile)
	} else {
		c, cerr := env.Client()
		if cerr != nil {
			return cerr
		}
		t, err = env.trustForCluster(ctx, c, o.trust)
	}
	if err != nil {
		return err
	}
	listing, err := o.listing(ctx, t)
	if err != nil {
		return err
	}
	if o.output == "json" {
		enc := json.NewEncoder(env.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(listing)
	}
	return printCatalog(env.Out, env.ErrOut, listing)
}

// listing checks each of t's catalog entries: a Verified one's row holds
// its signed manifest, any other one's why not.
func (o *catalogListOptions) listing(ctx context.Context, t trust) (catalogListing, error) {
	listing := catalogListing{Source: t.catalog, Version: t.version, Plugins: []catalogRow{}}
	for _, e := range t.policy.Catalog().Entries() {
		res, err := o.env.checkImage(ctx, e.Image, t, o.trust)
		if err != nil {
			return catalogListing{}, err
		}
		row := catalogRow{Name: e.Name, Publisher: e.Publisher.Name, Identity: describeIdentity(e.Publisher.Identity),
			Image: e.Image.String(), Status: res.Verification.Reason}
		if res.Verification.Reason == v1alpha1.ReasonVerified {
			row.Manifest = res.Manifest
		} else {
			row.Message = res.Verification.Message
		}
		listing.Plugins = append(listing.Plugins, row)
	}
	return listing, nil
}

// printCatalog writes the table of `catalog list`.
func printCatalog(out, errOut io.Writer, l catalogListing) error {
	fmt.Fprintf(errOut, "Catalog: %s\n", display.Text(l.Source))
	if len(l.Plugins) == 0 {
		fmt.Fprintln(errOut, "The catalog lists no plugin.")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPUBLISHER\tVERSION\tSTATUS\tASKS FOR\tIMAGE")
	for _, r := range l.Plugins {
		asks := "-"
		if r.Manifest != nil {
			asks = asksFor(*r.Manifest)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", display.Text(r.Name), cell(display.Text(r.Publisher)), cell(orDash(display.Text(l.Version))),
			cell(display.Text(r.Status)), cell(asks), shortImage(r.Image))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range l.Plugins {
		if r.Message != "" {
			fmt.Fprintf(errOut, "%s: %s\n", display.Text(r.Name), display.Message(r.Message))
		}
	}
	return nil
}

// asksFor sums up a signed manifest in one line.
func asksFor(m plugins.Manifest) string {
	var caps []string
	for _, c := range m.Capabilities {
		caps = append(caps, string(c))
	}
	parts := []string{strings.Join(caps, "+")}
	if len(m.Egress) > 0 {
		parts = append(parts, "egress "+strings.Join(canonical(m.Egress), ","))
	}
	if len(m.Secrets) > 0 {
		var names []string
		for _, s := range m.Secrets {
			names = append(names, s.Name)
		}
		parts = append(parts, "secrets "+strings.Join(names, ","))
	}
	if len(m.DataTiers) > 0 {
		parts = append(parts, "data "+strings.Join(m.DataTiers, ","))
	}
	return display.Text(strings.Join(parts, "; "))
}
