package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugininit"
	"github.com/arkadiuss/openfief/internal/trust/catalog"
)

// initOptions are `openfief plugin init`'s flags and argument.
type initOptions struct {
	env  *Env
	lang string
	kind string
	dir  string
	sdk  string

	// project is what Validate checked.
	project plugininit.Options
}

// newInitCommand builds `openfief plugin init`: a new plugin project for a
// vendor, from the skeletons built into the binary.
func newInitCommand(env *Env) *cobra.Command {
	o := &initOptions{env: env}
	cmd := &cobra.Command{
		Use:   "init NAME --lang go|ts [--kind connector|view] [--dir DIR]",
		Short: "Write a new plugin project: code, test, manifest.json, Dockerfile",
		Long: `Write a new plugin project into DIR (default: ./NAME, which must be missing or
empty): a connector (or with --kind view, a view) written with OpenFief's Go or
TypeScript SDK, a test that calls it through the SDK's server as the core
does, its manifest.json, a multi-stage Dockerfile whose final stage runs as
user 65532 on distroless and carries the manifest label, and a README with the
next steps: build, label, sign, test. NAME follows the rule of a Plugin's
name: a lower-case DNS label starting with a letter, at most 56 characters.

A Go project requires the Go SDK of this CLI's release. A development build's
CLI has none: its go.mod requires a placeholder version, and needs
  go mod edit -replace github.com/arkadiuss/openfief/sdk/go=PATH/sdk/go
with PATH an OpenFief checkout, which --sdk writes for you. --sdk also works
for TypeScript, naming a checkout's built sdk/ts (a "file:" dependency).
The same arguments always write the same bytes.`,
		Example: `  # A Go connector in ./acme-rates
  openfief plugin init acme-rates --lang go

  # A TypeScript view in another folder
  openfief plugin init acme-sheet --lang ts --kind view --dir ~/src/acme-sheet

  # Against the SDK of an OpenFief checkout, without the network
  openfief plugin init acme-rates --lang go --sdk ~/src/openfief/sdk/go`,
		Args: exactArgs(1),
		RunE: runOptions(o),
	}
	cmd.Flags().StringVar(&o.lang, "lang", "", "the project's language: go or ts (required)")
	cmd.Flags().StringVar(&o.kind, "kind", string(plugininit.Connector), "what the plugin acts as: connector or view")
	cmd.Flags().StringVar(&o.dir, "dir", "", "the folder to write, missing or empty (default: ./NAME)")
	cmd.Flags().StringVar(&o.sdk, "sdk", "", "build against the SDK in this folder of an OpenFief checkout (its sdk/go, or its built sdk/ts) instead of the published one")
	return cmd
}

// Complete takes NAME and the default --dir.
func (o *initOptions) Complete(args []string) error {
	o.project = plugininit.Options{
		Name: args[0], Lang: plugininit.Lang(o.lang), Kind: plugininit.Kind(o.kind),
		SDK: o.sdk, Version: catalog.Version(),
	}
	if o.dir == "" {
		o.dir = args[0]
	}
	return nil
}

// Validate refuses a NAME that is not a plugin's name (exit 8), an unknown
// --lang or --kind and an --sdk folder without the SDK (exit 2).
func (o *initOptions) Validate() error {
	err := o.project.Validate()
	var oe *plugininit.OptionError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &oe) && oe.Option == "NAME":
		return exitf(ExitInvalid, "NAME: %w", oe.Err)
	case errors.As(err, &oe):
		return exitf(ExitUsage, "%w", err)
	}
	return exitf(ExitFailure, "%w", err)
}

// Run writes the project and says what was written and what comes next.
func (o *initOptions) Run(context.Context) error {
	files, err := plugininit.Write(o.dir, o.project)
	if err != nil {
		var oe *plugininit.OptionError
		if errors.As(err, &oe) {
			return exitf(ExitUsage, "--dir %s: %w", display.Text(o.dir), oe.Err)
		}
		return exitf(ExitFailure, "writing %s: %w", display.Text(o.dir), err)
	}
	lang := map[plugininit.Lang]string{plugininit.Go: "Go", plugininit.TypeScript: "TypeScript"}[o.project.Lang]
	out := o.env.Out
	fmt.Fprintf(out, "Wrote the %s %s %s into %s:\n", lang, o.project.Kind, o.project.Name, display.Text(o.dir))
	for _, f := range files {
		fmt.Fprintf(out, "  %s\n", display.Text(filepath.FromSlash(f)))
	}
	if o.project.Lang == plugininit.Go && o.project.SDK == "" && o.project.Version == "" {
		fmt.Fprintf(out, "This CLI is a development build: go.mod requires %s %s, which only a replace provides:\n  go mod edit -replace %s=PATH/sdk/go\n",
			plugininit.GoSDKModule, plugininit.DevGoSDKVersion, plugininit.GoSDKModule)
	}
	fmt.Fprintf(out, "Next: %s (build, label with `openfief plugin label`, sign, test with `openfief plugin test`).\n", display.Text(filepath.Join(o.dir, "README.md")))
	return nil
}
