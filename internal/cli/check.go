package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/arkadiuss/openfief/internal/check"
	"github.com/arkadiuss/openfief/internal/core/ownerapi"
)

// defaultCheckTimeout bounds a whole `openfief check` unless --timeout says
// otherwise; each call is bounded by check.DefaultCallTimeout besides.
const defaultCheckTimeout = 2 * time.Minute

// newCheckCommand builds `openfief check`: the installation checks of
// internal/check, grouped like `linkerd check` (OF-28).
func newCheckCommand(env *Env) *cobra.Command {
	var (
		pre     bool
		output  string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "check [--pre] [-o json]",
		Short: "Check that the cluster can run the platform and that the installed platform works",
		Long: `Check the cluster and the platform, one line per check, grouped: the
Kubernetes version and the APIs the platform needs, its CRDs; with --pre only
what an install needs (the namespace free, your permissions on every kind it
applies); without it also the installed platform: every Deployment Available
and running the images it pins, the admission policy bound, the signing keys
the operator publishes present and fresh, the allow-list readable, and
openfief-core answering with its store. ✔ passed, ✖ failed, ! a warning; a
failure or warning says why and how to fix it. Exit 0 when nothing failed,
1 when a check failed.`,
		Example: `  # Before an install: can it go ahead?
  openfief check --pre

  # After it, and in scripts
  openfief check
  openfief check -o json | jq '.checks[] | select(.status != "ok")'`,
		Args: exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" {
				return exitf(ExitUsage, "-o %q: only json is supported", output)
			}
			if timeout <= 0 {
				return exitf(ExitUsage, "--timeout must be positive")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return env.check(ctx, pre, output)
		}),
	}
	cmd.Flags().BoolVar(&pre, "pre", false, "check only what an install needs, before installing")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json (default: lines grouped by heading)")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultCheckTimeout, "bounds the whole check; each call is bounded to "+check.DefaultCallTimeout.String())
	return cmd
}

// check runs the checks and prints them; a failed check is ExitFailure.
func (e *Env) check(ctx context.Context, pre bool, output string) error {
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
	if output == "json" {
		if err := check.WriteJSON(e.Out, rs, pre); err != nil {
			return err
		}
	} else {
		check.WriteText(e.Out, rs)
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
