package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/display"
)

// newWaitCommand is `openfief plugin wait NAME --for REASON`: it blocks until
// the plugin's Ready condition has that reason for its current generation.
func newWaitCommand(env *Env) *cobra.Command {
	var (
		reason  string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "wait NAME --for REASON",
		Short: "Wait until a plugin's Ready condition has a reason",
		Long: `wait polls the Plugin until the operator has written status for its current
generation and its Ready condition has the given reason (Running,
RunningPreviousVersion, NoGrant, AwaitingApproval, ...), or until --timeout.
It exits 0 when the reason is reached, 9 when the plugin does not exist, and
1 on a timeout, naming the reason last seen.`,
		Example: `  openfief plugin wait fx --for Running --timeout 60s`,
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if reason == "" {
				return usageError(fmt.Errorf("--for is required"))
			}
			c, err := env.Client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			last := "no status yet"
			for {
				var p v1alpha1.Plugin
				err := c.Get(ctx, types.NamespacedName{Namespace: env.Namespace, Name: args[0]}, &p)
				switch {
				case apierrors.IsNotFound(err):
					return exitf(ExitNotFound, "plugin %q not found in namespace %s", args[0], env.Namespace)
				case err == nil:
					for _, cond := range p.Status.Conditions {
						if cond.Type == v1alpha1.ConditionReady && p.Status.ObservedGeneration == p.Generation {
							if cond.Reason == reason {
								fmt.Fprintf(env.Out, "%s: Ready=%s (%s)\n", args[0], display.Text(string(cond.Status)), display.Text(cond.Reason))
								return nil
							}
							last = display.Message(cond.Reason + ": " + cond.Message)
						}
					}
				}
				select {
				case <-ctx.Done():
					return exitf(ExitFailure, "plugin %q did not reach %s within %s; last seen %s", args[0], reason, timeout, last)
				case <-time.After(250 * time.Millisecond):
				}
			}
		},
	}
	cmd.Flags().StringVar(&reason, "for", "", "the Ready reason to wait for")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long to wait")
	return cmd
}
