package cli

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/dashboard"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// dashboardOptions are `openfief dashboard`'s flags.
type dashboardOptions struct {
	env          *Env
	port         int
	noBrowser    bool
	allowApprove bool
	coreURL      string
}

// newDashboardCommand builds `openfief dashboard`: the local verification
// page (OF-9, OF-12).
func newDashboardCommand(env *Env) *cobra.Command {
	o := &dashboardOptions{env: env}
	cmd := &cobra.Command{
		Use:   "dashboard [--port N] [--no-browser] [--allow-approve] [--core-url URL]",
		Short: "Serve a local page of the plugins' verification status, live",
		Long: `Serve a page on 127.0.0.1 that shows every plugin of the namespace: whether its
image is Verified (the catalog pins its digest and its publisher signed it) or
only signed by a trusted signer, who signed it, its digest, what waits for your
approval and the command that approves it. It follows the cluster
through watches and updates the open page as Plugins and PluginGrants change.

It also asks openfief-core every few seconds what it recorded: each plugin's
page shows its last and next sync (or export, for a view), its last error and
the rows stored, and a Removed data section lists what the core keeps of
uninstalled plugins, each with the 'openfief plugin purge-data KEY' command
that deletes it (the dashboard deletes nothing). The core is reached as
'plugin status' reaches it: through the API server's service proxy, or
--core-url / $OPENFIEF_CORE_URL, with the owner's token; a core that does not
answer is said on the page.

It reads with your kubeconfig's credentials and writes nothing, unless
--allow-approve puts an Approve button on each plugin's page: it asks you to
confirm exactly what it adds, then writes the PluginGrant as 'openfief plugin
approve NAME --yes' does, refusing if the plugin or grant changed since the
page showed them. The URL it
prints carries a random token that every request must present, so other users
of this machine cannot read the page; keep it to yourself. It opens your
browser ($BROWSER, else xdg-open) unless --no-browser is given, and stops on
Ctrl-C.`,
		Example: `  openfief dashboard
  openfief dashboard --port 8417 --no-browser
  openfief dashboard --allow-approve`,
		Args: exactArgs(0),
		RunE: runOptions(o),
	}
	cmd.Flags().IntVar(&o.port, "port", 0, "the port on 127.0.0.1 to serve on (default: any free port)")
	cmd.Flags().BoolVar(&o.noBrowser, "no-browser", false, "print the URL only; do not open a browser")
	cmd.Flags().BoolVar(&o.allowApprove, "allow-approve", false, "put an Approve button on each plugin's page (asks for confirmation, then writes its PluginGrant)")
	cmd.Flags().StringVar(&o.coreURL, "core-url", defaultCoreURL(), "read openfief-core's owner API at this URL instead of through the API server's service proxy: https, or http to a loopback address (default $"+EnvCoreURL+")")
	return cmd
}

// Complete has nothing to fill: the dashboard takes no argument.
func (o *dashboardOptions) Complete([]string) error { return nil }

// Validate refuses a --port outside 0 to 65535.
func (o *dashboardOptions) Validate() error {
	if o.port < 0 || o.port > 65535 {
		return usageError(fmt.Errorf("--port %d: want 0 (any free port) to 65535", o.port))
	}
	return nil
}

// Run serves the page until ctx ends, opening a browser on it unless
// --no-browser.
func (o *dashboardOptions) Run(ctx context.Context) error {
	env := o.env
	opts, err := o.serverOptions()
	if err != nil {
		return err
	}
	srv, err := dashboard.New(opts, o.port)
	if err != nil {
		return exitf(ExitFailure, "%w", err)
	}
	fmt.Fprintf(env.Out, "OpenFief dashboard for namespace %s: %s\n", env.Namespace, srv.URL())
	fmt.Fprintln(env.Out, "The URL holds this run's access token: do not share it. Ctrl-C stops the dashboard.")
	if !o.noBrowser {
		cleanup, err := openBrowser(srv)
		defer cleanup()
		if err != nil {
			fmt.Fprintf(env.ErrOut, "Could not open a browser (%v); open the URL above yourself.\n", err)
		}
	}
	if err := srv.Serve(ctx); err != nil {
		return exitf(ExitFailure, "dashboard: %w", err)
	}
	return nil
}

// serverOptions are the dashboard server's options: the cluster, this
// binary's catalog, the core's reader, and the approver with
// --allow-approve.
func (o *dashboardOptions) serverOptions() (dashboard.Options, error) {
	env := o.env
	cfg, err := env.RESTConfig()
	if err != nil {
		return dashboard.Options{}, err
	}
	// This binary's catalog: its release's, as that release's
	// operator holds it; never a cluster object's.
	cat, _, _, err := env.catalogFromFile("")
	if err != nil {
		return dashboard.Options{}, err
	}
	coreStatus, err := env.DashboardCore(o.coreURL)
	if err != nil {
		return dashboard.Options{}, err
	}
	opts := dashboard.Options{
		Config: cfg, Namespace: env.Namespace, Catalog: cat, ApproveCommand: env.ApproveCommand, StatusCommand: env.PluginStatusCommand, Now: env.Now,
		CoreStatus: coreStatus, PurgeCommand: func(key string) string { return env.PurgeDataCommand(key, o.coreURL) },
	}
	if o.allowApprove {
		opts.Approve = env.ApprovePending
	}
	return opts, nil
}

// dashboardCoreTimeout bounds one of the dashboard's questions to the core
// at the HTTP client; the dashboard bounds its polls too.
const dashboardCoreTimeout = 10 * time.Second

// DashboardCore returns the dashboard's reader of openfief-core's status:
// the owner API's status of every instance, reached as `plugin status`
// reaches it (coreURL, else the API server's service proxy) with the
// owner's token, minted again before it expires. Its errors never hold the
// token.
func (e *Env) DashboardCore(coreURL string) (dashboard.CoreStatusFunc, error) {
	api, err := e.coreAPI(coreURL, dashboardCoreTimeout)
	if err != nil {
		return nil, err
	}
	return api.statusAll, nil
}

// PurgeDataCommand is the openfief command that purges the removed
// instance key's data, naming the --kubeconfig, --context and -n this
// command was given and the --core-url when it is not $OPENFIEF_CORE_URL,
// so it runs against the same core. The dashboard shows it.
func (e *Env) PurgeDataCommand(key, coreURL string) string {
	word := key
	if checkKey(key) != nil || strings.HasPrefix(key, "~") {
		word = shellQuote(key)
	}
	args := append([]string{"openfief", "plugin", "purge-data", word}, e.clusterArgs()...)
	if coreURL != "" && coreURL != defaultCoreURL() {
		args = append(args, "--core-url", shellQuote(coreURL))
	}
	return strings.Join(args, " ")
}

// ApprovePending approves everything the plugin req.Name waits for, as
// `openfief plugin approve NAME --yes` does (plugins.Approve, then the same
// grant write), for the dashboard's Approve button. It refuses with
// dashboard.ErrChanged when the Plugin or its grant is no longer at the
// version the owner confirmed, so nothing is approved that the owner did not
// see.
func (e *Env) ApprovePending(ctx context.Context, req dashboard.ApprovalRequest) (string, error) {
	c, err := e.Client()
	if err != nil {
		return "", err
	}
	p, err := e.getPlugin(ctx, c, req.Name)
	if err != nil {
		return "", err
	}
	g, err := e.getGrant(ctx, c, req.Name)
	if err != nil {
		return "", err
	}
	grantVersion := ""
	if g != nil {
		grantVersion = g.ResourceVersion
	}
	if p.ResourceVersion != req.PluginVersion || grantVersion != req.GrantVersion {
		return "", dashboard.ErrChanged
	}
	a, err := plugins.Approve(req.Name, apiconv.ManifestFromAPI(p.Spec.Manifest), grantFromAPI(g), plugins.Selection{})
	if err != nil {
		return "", approvalError(req.Name, nil, err)
	}
	verb, err := e.writeGrant(ctx, c, req.Name, g, a)
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			return "", dashboard.ErrChanged
		}
		return "", err
	}
	return fmt.Sprintf("plugingrant/%s %s", req.Name, verb), nil
}

// ApproveCommand is the openfief command that approves everything the
// plugin name waits for, with the --kubeconfig, --context and --namespace
// this command was given, so it runs against the same cluster. `plugin
// status`, `plugin install` and the dashboard all show this one.
func (e *Env) ApproveCommand(name string) string {
	args := append([]string{"openfief", "plugin", "approve", shellQuote(name)}, e.clusterArgs()...)
	return strings.Join(args, " ")
}

// clusterArgs are the --kubeconfig, --context and -n flags this command was
// given, quoted for a shell, for the commands the pages show.
func (e *Env) clusterArgs() []string {
	var args []string
	if e.Kubeconfig != "" {
		args = append(args, "--kubeconfig", shellQuote(e.Kubeconfig))
	}
	if e.Context != "" {
		args = append(args, "--context", shellQuote(e.Context))
	}
	if e.Namespace != DefaultNamespace {
		args = append(args, "-n", shellQuote(e.Namespace))
	}
	return args
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
