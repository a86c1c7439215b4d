package cli

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/arkadiuss/openfief/internal/dashboard"
	"github.com/arkadiuss/openfief/internal/trust/catalog"
)

// newDashboardCommand builds `openfief dashboard`: the local verification
// page (OF-9, OF-12).
func newDashboardCommand(env *Env) *cobra.Command {
	var (
		port      int
		noBrowser bool
	)
	cmd := &cobra.Command{
		Use:   "dashboard [--port N] [--no-browser]",
		Short: "Serve a local page of the plugins' verification status, live",
		Long: `Serve a page on 127.0.0.1 that shows every plugin of the namespace: whether its
image is Verified (the catalog pins its digest and its publisher signed it) or
only signed by a trusted signer, who signed it, its digest, what waits for your
approval and the command that approves it (D-56). It follows the cluster
through watches and updates the open page as Plugins and PluginGrants change.

It reads with your kubeconfig's credentials and writes nothing. The URL it
prints carries a random token that every request must present, so other users
of this machine cannot read the page; keep it to yourself. It opens your
browser ($BROWSER, else xdg-open) unless --no-browser is given, and stops on
Ctrl-C.`,
		Example: `  openfief dashboard
  openfief dashboard --port 8417 --no-browser`,
		Args: exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if port < 0 || port > 65535 {
				return usageError(fmt.Errorf("--port %d: want 0 (any free port) to 65535", port))
			}
			cfg, err := env.RESTConfig()
			if err != nil {
				return err
			}
			cat, err := catalog.Load()
			if err != nil {
				return exitf(ExitFailure, "embedded catalog: %w", err)
			}
			srv, err := dashboard.New(dashboard.Options{
				Config: cfg, Namespace: env.Namespace, Catalog: cat, ApproveCommand: env.ApproveCommand, Now: env.Now,
			}, port)
			if err != nil {
				return exitf(ExitFailure, "%w", err)
			}
			fmt.Fprintf(env.Out, "OpenFief dashboard for namespace %s: %s\n", env.Namespace, srv.URL())
			fmt.Fprintln(env.Out, "The URL holds this run's access token: do not share it. Ctrl-C stops the dashboard.")
			if !noBrowser {
				if err := openBrowser(srv.URL()); err != nil {
					fmt.Fprintf(env.ErrOut, "Could not open a browser (%v); open the URL above yourself.\n", err)
				}
			}
			if err := srv.Serve(cmd.Context()); err != nil {
				return exitf(ExitFailure, "dashboard: %w", err)
			}
			return nil
		}),
	}
	cmd.Flags().IntVar(&port, "port", 0, "the port on 127.0.0.1 to serve on (default: any free port)")
	cmd.Flags().BoolVar(&noBrowser, "no-browser", false, "print the URL only; do not open a browser")
	return cmd
}

// openBrowser starts $BROWSER, else xdg-open, on url without waiting for it.
// The URL is passed as an argument, never through a shell.
func openBrowser(url string) error {
	name := os.Getenv("BROWSER")
	if name == "" {
		name = "xdg-open"
	}
	c := exec.Command(name, url)
	if err := c.Start(); err != nil {
		return err
	}
	go func() { _ = c.Wait() }()
	return nil
}

// ApproveCommand is the openfief command that approves everything the
// plugin name waits for, with the --kubeconfig, --context and --namespace
// this command was given, so it runs against the same cluster. `plugin
// status`, `plugin install` and the dashboard all show this one.
func (e *Env) ApproveCommand(name string) string {
	args := []string{"openfief", "plugin", "approve", shellQuote(name)}
	if e.Kubeconfig != "" {
		args = append(args, "--kubeconfig", shellQuote(e.Kubeconfig))
	}
	if e.Context != "" {
		args = append(args, "--context", shellQuote(e.Context))
	}
	if e.Namespace != DefaultNamespace {
		args = append(args, "-n", shellQuote(e.Namespace))
	}
	return strings.Join(args, " ")
}

// shellSafe are words a POSIX shell takes as they are.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
