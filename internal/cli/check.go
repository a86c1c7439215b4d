package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/arkadiuss/openfief/internal/check"
	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// defaultCheckTimeout bounds a whole `openfief check` unless --timeout says
// otherwise; each call is bounded by check.DefaultCallTimeout besides.
const defaultCheckTimeout = 2 * time.Minute

// checkOptions are `openfief check`'s flags.
type checkOptions struct {
	env       *Env
	pre       bool
	output    string
	timeout   time.Duration
	isolation bool
	// iso are the flags --isolation reads.
	iso isolationOptions
}

// newCheckCommand builds `openfief check`: the installation checks of
// internal/check, grouped like `linkerd check` (OF-28).
func newCheckCommand(env *Env) *cobra.Command {
	o := &checkOptions{env: env}
	cmd := &cobra.Command{
		Use:   "check [--pre | --isolation] [-o json]",
		Short: "Check that the cluster can run the platform and that the installed platform works",
		Long: `Check the cluster and the platform, one line per check, grouped: the
Kubernetes version and the APIs the platform needs, its CRDs; with --pre only
what an install needs (the namespace free, your permissions on every kind it
applies); without it also the installed platform: every Deployment Available
and running the images it pins, the admission policy bound, the signing keys
the operator publishes present and fresh, the allow-list readable, and
openfief-core answering with its store. ✔ passed, ✖ failed, ! a warning; a
failure or warning says why and how to fix it.

With --isolation it then proves that plugins are isolated on this cluster:
it installs two short-lived probe plugins (the probe image this CLI's
release pins, or --probe-image, approved for exactly the probe manifest
this CLI was built with: ` + probeAsks() + `; an image whose signed
label asks for anything else is refused before anything is created), which
the operator runs, labels and polices exactly as any plugin, and from
inside them tries the cluster DNS over UDP and TCP, the
node's resolver, an address outside the cluster (--outside-address), the API
server, the other probe, the core's two ports, and the egress proxy without a
token, for a host not granted and for the granted host. It prints the truth
table (cell, expected, observed) and fails naming each cell that differs and
what it means. The probes, labelled openfief.io/check-run, are removed when it
ends, also after a failure or Ctrl-C; probes an interrupted run left (killed
outright) are removed by the next run. Nothing else is ever deleted. It runs
in the platform namespace only and needs to create Plugins and PluginGrants
and to exec into pods there.

Exit 0 when nothing failed, 1 when a check failed (with --isolation: also
when a cell differs or the probes could not be measured), 2 on wrong flags.`,
		Example: `  # Before an install: can it go ahead?
  openfief check --pre

  # After it, and in scripts
  openfief check
  openfief check -o json | jq '.checks[] | select(.status != "ok")'

  # Does this cluster enforce what the platform asks of it?
  openfief check --isolation`,
		Args: exactArgs(0),
		RunE: runOptions(o),
	}
	cmd.Flags().BoolVar(&o.pre, "pre", false, "check only what an install needs, before installing")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: json (default: lines grouped by heading)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", defaultCheckTimeout, "bounds the whole check; each call is bounded to "+check.DefaultCallTimeout.String())
	cmd.Flags().BoolVar(&o.isolation, "isolation", false, "also prove plugin isolation with two probe plugins (creates and removes them; see above)")
	cmd.Flags().StringVar(&o.iso.probeImage, "probe-image", "", "with --isolation: the probe image, repository@sha256:<hex>, signed by a trusted signer with exactly this CLI's probe manifest (default: the probe this CLI's release pins; a release's CLI takes only that digest, a development build requires the flag)")
	cmd.Flags().StringVar(&o.iso.outside, "outside-address", defaultOutsideAddress, "with --isolation: an address outside the cluster a probe tries to reach directly, host:port")
	cmd.Flags().DurationVar(&o.iso.settle, "settle", defaultSettle, "with --isolation: how long a cell that differs is measured again, for policies still reaching the node's firewall")
	o.iso.trust.register(cmd.Flags(), true)
	return cmd
}

// Complete has nothing to fill: check takes no argument.
func (o *checkOptions) Complete([]string) error { return nil }

// Validate refuses an output other than json, a --timeout that is not
// positive, --isolation with --pre or in another namespace, a negative
// --settle and an --outside-address without a port.
func (o *checkOptions) Validate() error {
	if o.output != "" && o.output != "json" {
		return exitf(ExitUsage, "-o %q: only json is supported", o.output)
	}
	if o.timeout <= 0 {
		return exitf(ExitUsage, "--timeout must be positive")
	}
	if o.pre && o.isolation {
		return exitf(ExitUsage, "--isolation needs the installed platform; it cannot run with --pre")
	}
	if o.isolation && o.env.Namespace != plugins.Namespace {
		return exitf(ExitUsage, "--isolation runs its probes as plugins, which the operator runs only in namespace %s, not %s", plugins.Namespace, o.env.Namespace)
	}
	if o.iso.settle < 0 {
		return exitf(ExitUsage, "--settle must not be negative")
	}
	if _, _, err := net.SplitHostPort(o.iso.outside); err != nil {
		return exitf(ExitUsage, "--outside-address %q: want host:port: %v", o.iso.outside, err)
	}
	return nil
}

// Run runs the checks, and the isolation probes with --isolation, within
// --timeout.
func (o *checkOptions) Run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	var iso *isolationOptions
	if o.isolation {
		iso = &o.iso
	}
	return o.env.check(ctx, o.pre, o.output, iso)
}

// The defaults of --outside-address and --settle.
const (
	defaultOutsideAddress = "1.1.1.1:443"
	defaultSettle         = 10 * time.Second
)

// check runs the checks and prints them; a failed check is ExitFailure.
// iso, when set, adds the isolation probes once the other checks passed.
func (e *Env) check(ctx context.Context, pre bool, output string, iso *isolationOptions) error {
	cfg, err := e.RESTConfig()
	if err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = check.DefaultCallTimeout
	c, err := e.Client()
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return exitf(ExitFailure, "connecting to the API server: %w", err)
	}
	o := check.Options{Client: c, Discovery: dc, Pre: pre}
	if !pre {
		api, err := e.coreAPI("", check.DefaultCallTimeout)
		if err != nil {
			return err
		}
		o.CoreHealth = api.health
		o.CoreStatus = func(ctx context.Context) error {
			var all json.RawMessage
			return api.do(ctx, http.MethodGet, ownerapi.PathStatus, nil, nil, &all)
		}
	}
	rs := check.Run(ctx, o)
	var table []check.Row
	if iso != nil {
		switch {
		case !check.Passed(rs):
			rs = append(rs, check.IsolationNotRun("the checks above failed"))
		default:
			rows, results, err := e.runIsolation(ctx, *iso)
			if ExitCode(err) == ExitUsage {
				return err
			}
			if err != nil {
				results = []check.Result{check.IsolationNotRun(err.Error())}
			}
			table = rows
			rs = append(rs, results...)
		}
		check.Sort(rs)
	}
	if output == "json" {
		if err := check.WriteJSON(e.Out, rs, pre, table); err != nil {
			return err
		}
	} else {
		if len(table) > 0 {
			check.WriteTable(e.Out, table)
		}
		check.WriteText(e.Out, rs)
	}
	if summary := check.IsolationSummary(table); summary != "" {
		return exitf(ExitFailure, "%s", summary)
	}
	if !check.Passed(rs) {
		return exitf(ExitFailure, "%s", failedSummary(rs))
	}
	return nil
}

// failedSummary names the failed checks for the Error: line.
func failedSummary(rs []check.Result) string {
	n, first := 0, ""
	for _, r := range rs {
		if r.Status == check.Fail {
			if n == 0 {
				first = r.Name
			}
			n++
		}
	}
	if n == 1 {
		return "check failed: " + first
	}
	return fmt.Sprintf("%d checks failed, the first: %s", n, first)
}

// health asks the core's /healthz, which needs no owner token, through the
// same road as every owner API call.
func (c *coreAPI) health(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("reaching the core through %s: %w", c.via, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorText))
	if resp.StatusCode != http.StatusOK {
		msg := string(raw)
		var st struct{ Kind, Message string }
		if json.Unmarshal(raw, &st) == nil && st.Kind == "Status" && st.Message != "" {
			msg = st.Message
		}
		return &errCoreStatus{code: resp.StatusCode, msg: msg}
	}
	return nil
}
