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

// waitOptions are `openfief plugin wait`'s flags and argument.
type waitOptions struct {
	env     *Env
	reason  string
	timeout time.Duration

	// name is the argument NAME.
	name string
}

// newWaitCommand is `openfief plugin wait NAME --for REASON`: it blocks until
// the plugin's Ready condition has that reason for its current generation.
func newWaitCommand(env *Env) *cobra.Command {
	o := &waitOptions{env: env}
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
		RunE:    runOptions(o),
	}
	cmd.Flags().StringVar(&o.reason, "for", "", "the Ready reason to wait for")
	cmd.Flags().DurationVar(&o.timeout, "timeout", time.Minute, "how long to wait")
	return cmd
}

// Complete takes NAME.
func (o *waitOptions) Complete(args []string) error {
	o.name = args[0]
	return nil
}

// Validate refuses a missing --for.
func (o *waitOptions) Validate() error {
	if o.reason == "" {
		return usageError(fmt.Errorf("--for is required"))
	}
	return nil
}

// Run polls the Plugin until its Ready condition, for its current
// generation, has the reason, or until --timeout.
func (o *waitOptions) Run(ctx context.Context) error {
	env, name := o.env, o.name
	c, err := env.Client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	last := "no status yet"
	for {
		var p v1alpha1.Plugin
		err := c.Get(ctx, types.NamespacedName{Namespace: env.Namespace, Name: name}, &p)
		switch {
		case apierrors.IsNotFound(err):
			return exitf(ExitNotFound, "plugin %q not found in namespace %s", name, env.Namespace)
		case err == nil:
			for _, cond := range p.Status.Conditions {
				if cond.Type == v1alpha1.ConditionReady && p.Status.ObservedGeneration == p.Generation {
					if cond.Reason == o.reason {
						fmt.Fprintf(env.Out, "%s: Ready=%s (%s)\n", name, display.Text(string(cond.Status)), display.Text(cond.Reason))
						return nil
					}
					last = display.Message(cond.Reason + ": " + cond.Message)
				}
			}
		}
		select {
		case <-ctx.Done():
			return exitf(ExitFailure, "plugin %q did not reach %s within %s; last seen %s", name, o.reason, o.timeout, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
