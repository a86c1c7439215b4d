package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/arkadiuss/openfief/internal/boundedfile"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

// labelFormats are --format's values: how the label is written for each
// build tool. Each but "value" is shell-quoted, ready for eval, and written
// so that the tool's flag parser reads back exactly the label's value.
var labelFormats = map[string]func(label string) string{
	"value": func(l string) string { return l },
	// docker and buildah take --label's value as it is.
	"docker": func(l string) string { return "--label " + shellQuote(plugins.ManifestLabel+"="+l) },
	// crane's --label is a pflag map: a value with one "=" is read as it
	// is, one with more as a line of CSV.
	"crane": func(l string) string {
		kv := plugins.ManifestLabel + "=" + l
		if strings.Count(kv, "=") > 1 {
			kv = csvField(kv)
		}
		return shellQuote("--label=" + kv)
	},
	// ko's --image-label is a pflag list, always read as a line of CSV.
	"ko": func(l string) string { return shellQuote("--image-label=" + csvField(plugins.ManifestLabel+"="+l)) },
}

// csvField writes s as one quoted field of a CSV line, as pflag's list and
// map flags read their values: the JSON's commas and quotes stay in it.
func csvField(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// labelOptions are `openfief plugin label`'s flags and argument.
type labelOptions struct {
	env    *Env
	format string
	// check is --check IMAGE: compare IMAGE's label instead of printing.
	check    string
	registry trustFlags

	// path is the argument PATH: a manifest.json or a folder holding one.
	path string
}

// newLabelCommand builds `openfief plugin label`: a plugin's manifest.json
// as the value of its signed manifest label (D-42), for any build tool, or
// the check of a built image's label.
func newLabelCommand(env *Env) *cobra.Command {
	o := &labelOptions{env: env}
	cmd := &cobra.Command{
		Use:   "label [PATH] [--format value|docker|crane|ko] | label --check IMAGE [PATH]",
		Short: "Write a plugin image's manifest label from manifest.json, or check an image's",
		Long: `Read PATH (a manifest.json, or a folder holding one; default: the current
folder), check it with the operator's own rules, and print the value of the
image label ` + plugins.ManifestLabel + ` it makes: the JSON compacted, otherwise
byte for byte. The operator reads a plugin's manifest only from that label,
which the image's signature covers; first-party images carry exactly this
value.

--format writes it for a build tool, shell-quoted, as the tool's flag
parser reads it back:
  value   the label's value alone (default)
  docker  --label 'KEY=VALUE', for docker build and buildah
  crane   '--label=KEY=VALUE', for crane mutate (VALUE as CSV when it holds a "=")
  ko      '--image-label="KEY=VALUE"', for ko build (as CSV, quotes doubled)

--check IMAGE reads IMAGE (by tag or digest) from its registry, each platform
image of an index, and exits 1 naming the first difference when a label is
missing, invalid or asks for other things than manifest.json. It prints the
digest IMAGE resolved to, which is what you sign. Registries are read as
'plugin verify' reads them: HTTPS (plain HTTP for loopback or
--insecure-registry), every answer bounded, credentials from the docker
config. No signature is checked.`,
		Example: `  # The value, for a Dockerfile's ARG (see the Dockerfile plugin init writes)
  docker build -t registry.example/acme:0.1.0 --build-arg OPENFIEF_MANIFEST="$(openfief plugin label)" .

  # The same label without a build argument
  eval "docker build $(openfief plugin label --format docker) -t registry.example/acme:0.1.0 ."
  eval "crane mutate $(openfief plugin label --format crane) registry.example/acme:0.1.0"
  eval "ko build --bare $(openfief plugin label --format ko) ."

  # Check what was pushed, and read the digest to sign
  openfief plugin label --check registry.example/acme:0.1.0`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError(fmt.Errorf("%q takes at most one PATH, got %d arguments: usage: %s", cmd.CommandPath(), len(args), cmd.UseLine()))
			}
			return nil
		},
		RunE: runOptions(o),
	}
	cmd.Flags().StringVar(&o.format, "format", "value", "how to print the label: value, docker, crane or ko")
	cmd.Flags().StringVar(&o.check, "check", "", "an image (by tag or digest) whose label must be manifest.json's; exits 1 when it is not")
	o.registry.registerRegistry(cmd.Flags())
	return cmd
}

// Complete takes PATH.
func (o *labelOptions) Complete(args []string) error {
	o.path = "."
	if len(args) == 1 {
		o.path = args[0]
	}
	return nil
}

// Validate refuses an unknown --format, and --format with --check.
func (o *labelOptions) Validate() error {
	if _, ok := labelFormats[o.format]; !ok {
		return exitf(ExitUsage, "--format %q: one of value, docker, crane or ko", o.format)
	}
	if o.check != "" && o.format != "value" {
		return exitf(ExitUsage, "--format: not with --check, which prints no label")
	}
	return nil
}

// Run prints the label, or checks IMAGE's.
func (o *labelOptions) Run(ctx context.Context) error {
	file, label, err := readManifestLabel(o.path)
	if err != nil {
		return err
	}
	if o.check == "" {
		fmt.Fprintln(o.env.Out, labelFormats[o.format](label))
		return nil
	}
	return o.checkImage(ctx, file, label)
}

// readManifestLabel reads the manifest.json at path (or in the folder
// path) and returns its file name and label value. Its errors name the
// file and the rule; the value holds nothing a terminal would not show as
// written.
func readManifestLabel(path string) (string, string, error) {
	file := path
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		file = filepath.Join(path, "manifest.json")
	}
	raw, err := boundedfile.Read(file, plugins.MaxManifestFile)
	if err != nil {
		return "", "", exitf(ExitUsage, "PATH: %w", err)
	}
	label, err := plugins.ManifestLabelValue(raw)
	if err != nil {
		return "", "", exitf(ExitInvalid, "%s: %w", display.Text(file), err)
	}
	if err := plugins.CheckText(label, 0); err != nil {
		return "", "", exitf(ExitInvalid, "%s: %w: write such a character as a \\u escape", display.Text(file), err)
	}
	return file, label, nil
}

// checkImage compares the label of every image o.check names with label,
// the value of file.
func (o *labelOptions) checkImage(ctx context.Context, file, label string) error {
	kc, err := o.registry.keychain()
	if err != nil {
		return err
	}
	opts := append([]cosign.Option{cosign.WithInsecureRegistries(o.registry.insecure...), cosign.WithKeychain(kc)}, o.env.verifierOptions...)
	v, err := cosign.NewVerifier(opts...)
	if err != nil {
		return exitf(ExitFailure, "registry client: %w", err)
	}
	resolved, images, err := v.ReadLabel(ctx, o.check, plugins.ManifestLabel)
	if err != nil {
		return readLabelError(err)
	}
	want, _ := plugins.ParseManifestLabel(label) // readManifestLabel parsed it
	name := display.Text(o.check)
	var platforms []string
	reworded := false
	for _, img := range images {
		where := name
		if img.Platform != "" {
			where += " (" + display.Text(img.Platform) + ")"
			platforms = append(platforms, display.Text(img.Platform))
		}
		if err := labelDifference(img, label, want, file); err != nil {
			return exitf(ExitFailure, "%s: %w", where, err)
		}
		reworded = reworded || img.Value != label
	}
	fmt.Fprintf(o.env.Out, "Image:     %s\n", display.Text(resolved))
	if len(platforms) > 0 {
		fmt.Fprintf(o.env.Out, "Platforms: %s\n", strings.Join(platforms, ", "))
	}
	note := ""
	if reworded {
		note = " (the same manifest, written otherwise than `openfief plugin label` writes it)"
	}
	fmt.Fprintf(o.env.Out, "Label:     %s is %s's%s\n", plugins.ManifestLabel, display.Text(file), note)
	return nil
}

// labelDifference says how img's label differs from label, the value of
// file (want, parsed), or returns nil when it asks for the same things.
func labelDifference(img cosign.ImageLabel, label string, want plugins.Manifest, file string) error {
	if !img.Found {
		return fmt.Errorf("no %s label: build the image with `openfief plugin label`'s value", plugins.ManifestLabel)
	}
	if img.Value == label {
		return nil
	}
	got, err := plugins.ParseManifestLabel(img.Value)
	if err != nil {
		return fmt.Errorf("its %s label is not a manifest the operator accepts: %w", plugins.ManifestLabel, err)
	}
	field := want.FirstDifference(got)
	if field == "" {
		return nil // the same manifest, written differently
	}
	return fmt.Errorf("its %s label differs from %s in %q: the image has %s, %s has %s",
		plugins.ManifestLabel, display.Text(file), field, display.Text(manifestField(got, field)), display.Text(file), display.Text(manifestField(want, field)))
}

// manifestField is one field of m as JSON, "none" when m leaves it out.
func manifestField(m plugins.Manifest, field string) string {
	raw, err := json.Marshal(m)
	if err != nil {
		return "?"
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return "?"
	}
	v, ok := fields[field]
	if !ok {
		return "none"
	}
	return string(v)
}

// readLabelError maps a failed registry read to its exit code, as plugin
// verify's are: 12 refused, 7 unavailable, 6 not an image.
func readLabelError(err error) error {
	switch {
	case errors.Is(err, cosign.ErrRegistryUnauthorized):
		return exitf(ExitRegistryUnauthorized, "--check: %w", err)
	case errors.Is(err, cosign.ErrRegistryUnavailable):
		return exitf(ExitRegistryUnavailable, "--check: %w", err)
	case errors.Is(err, plugins.ErrInvalidImage):
		return exitf(ExitInvalidImage, "--check: %w", err)
	}
	return exitf(ExitFailure, "--check: %w", err)
}
