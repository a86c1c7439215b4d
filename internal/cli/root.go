package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/harness"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

// DefaultNamespace is the namespace commands act in unless -n says
// otherwise: the only one the operator watches (D-15).
const DefaultNamespace = plugins.Namespace

// Streams are where a command reads answers and writes output. Tests pass
// buffers; the binary passes the process's standard streams.
type Streams struct {
	// In is read for confirmations.
	In io.Reader
	// Out receives results: tables, reports, "created" lines, prompts.
	Out io.Writer
	// ErrOut receives errors and hints.
	ErrOut io.Writer
	// Interactive says a person can answer on In. Without it, a change that
	// needs confirmation is refused unless --yes is given.
	Interactive bool
}

// StdStreams returns the process's standard streams; they are interactive
// when standard input is a terminal.
func StdStreams() Streams {
	return Streams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, Interactive: term.IsTerminal(int(os.Stdin.Fd()))}
}

// Env is what every command shares: the streams, the global flags, the
// clock and the way to reach the cluster. Commands added from other files
// (such as `openfief dev`) get the same Env through their CommandFactory.
type Env struct {
	Streams
	// Kubeconfig is --kubeconfig: the kubeconfig file; empty means the
	// usual rules ($KUBECONFIG, then ~/.kube/config).
	Kubeconfig string
	// Context is --context: the kubeconfig context; empty means current.
	Context string
	// Namespace is -n/--namespace, DefaultNamespace unless set.
	Namespace string
	// Now is the clock ages are computed against.
	Now func() time.Time

	// verifierOptions are added to the image verifier's options; tests
	// use them to trust a virtual Sigstore.
	verifierOptions []cosign.Option
	// trustRootStart, when set, replaces the embedded Sigstore root the
	// cluster's openfief-sigstore-root is verified from; tests use their own
	// TUF repository.
	trustRootStart *cosign.TrustRoot
	// builtinCatalog, when set, stands for the catalog a release links into
	// the binary (catalog.File); tests use it as a release's CLI.
	builtinCatalog []byte
	// pluginRuntime, when set, runs `plugin test`'s plugin instead of
	// harness.NewRuntime; tests use the local-process stand-in.
	pluginRuntime harness.Starter
	// ownerMint, when set, mints the owner's token instead of a
	// TokenRequest; tests use it with a core on loopback.
	ownerMint func(context.Context) (string, error)
}

// NewEnv returns an Env on s with the default namespace and the system clock.
func NewEnv(s Streams) *Env {
	return &Env{Streams: s, Namespace: DefaultNamespace, Now: time.Now}
}

// CommandFactory builds one top-level command on the shared Env.
type CommandFactory func(env *Env) *cobra.Command

// commandFactories are the top-level commands every root command gets.
// Commands that live outside this package (`openfief dev`, in
// internal/devstack, which links the operator) are passed as extra
// factories by cmd/openfief.
var commandFactories = []CommandFactory{newPluginCommand, newCatalogCommand, newDashboardCommand, newPlatformCommand, newCheckCommand, newCoreCommand, newAttentionCommand, newVersionCommand}

// NewRootCommand builds `openfief` with its global flags, the registered
// top-level commands and any extra ones, all on env.
func NewRootCommand(env *Env, extra ...CommandFactory) *cobra.Command {
	root := &cobra.Command{
		Use:   "openfief",
		Short: "Install, approve and inspect OpenFief plugins",
		Long: `openfief is the owner's command line for OpenFief plugins.

It works against the current kubeconfig context like kubectl, in the openfief
namespace by default. It checks plugin images the way the operator does before
anything is written, and shows what a plugin asks for before you grant it.`,
		Example: `  # Check an image's signature and read its signed manifest (no cluster needed)
  openfief plugin verify ghcr.io/example/nbp-fx@sha256:<hex> --signers signers.json

  # Install, see what it asks for, approve it
  openfief plugin install nbp-fx --image ghcr.io/example/nbp-fx@sha256:<hex>
  openfief plugin approve nbp-fx
  openfief plugin list`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          noArgs,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	// --version prints the client's part of `openfief version` on one
	// line, as `flux --version` does; defined here so it has no -v.
	root.Version = Client().String()
	root.SetVersionTemplate("openfief version {{.Version}}\n")
	root.Flags().Bool("version", false, "print the CLI's version and commit ('openfief version' adds the platform's)")
	root.SetIn(env.In)
	root.SetOut(env.Out)
	root.SetErr(env.ErrOut)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return usageError(err) })
	pf := root.PersistentFlags()
	pf.StringVar(&env.Kubeconfig, "kubeconfig", env.Kubeconfig, "path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	pf.StringVar(&env.Context, "context", env.Context, "the kubeconfig context to use (default: the current context)")
	pf.StringVarP(&env.Namespace, "namespace", "n", env.Namespace, "the namespace of the plugins; the operator watches only openfief")
	for _, f := range append(append([]CommandFactory(nil), commandFactories...), extra...) {
		root.AddCommand(f(env))
	}
	return root
}

// Bounds of an error as printed: each line, and how many lines.
const (
	errorLineMax  = 2048
	errorLinesMax = 200
)

// Main runs openfief with args on s and returns the exit code: it prints
// the error, if any, as "Error: ..." on s.ErrOut, with a pointer to --help
// for usage errors. extra adds top-level commands.
func Main(ctx context.Context, args []string, s Streams, extra ...CommandFactory) int {
	return run(ctx, NewEnv(s), args, extra...)
}

// run is Main on a given Env.
func run(ctx context.Context, env *Env, args []string, extra ...CommandFactory) int {
	s := env.Streams
	root := NewRootCommand(env, extra...)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	var q quietError
	if errors.As(err, &q) {
		return ExitCode(err)
	}
	// An error can carry text from outside (a registry's diagnostic, the
	// core's answer): each of its lines is shown through internal/display.
	fmt.Fprintf(s.ErrOut, "Error: %s\n", display.Lines(err.Error(), errorLineMax, errorLinesMax))
	code := ExitCode(err)
	if code == ExitUsage && cmd != nil {
		fmt.Fprintf(s.ErrOut, "See '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// runE adapts a command's function so every error it returns carries an
// exit code (ExitFailure unless it set one), which ExitCode tells apart from
// cobra's own usage errors.
func runE(f func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return withCode(ExitFailure, f(cmd, args))
	}
}

// usageError marks err as a usage error.
func usageError(err error) error { return &ExitError{Code: ExitUsage, Err: err} }

// UsageError marks err as a usage error (exit code ExitUsage), for commands
// defined outside this package.
func UsageError(err error) error { return usageError(err) }

// NoArgs refuses any argument, naming the unknown command; for commands
// defined outside this package.
func NoArgs(cmd *cobra.Command, args []string) error { return noArgs(cmd, args) }

// noArgs refuses arguments to a command group, naming the unknown command.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError(fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath()))
	}
	return nil
}

// exactArgs requires n arguments, named in the error as in the Use line.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError(fmt.Errorf("%q takes %d argument(s), got %d: usage: %s", cmd.CommandPath(), n, len(args), cmd.UseLine()))
		}
		return nil
	}
}

// errAborted is wrapped by the error of a declined confirmation.
var errAborted = errors.New("not confirmed")
