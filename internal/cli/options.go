package cli

import (
	"context"

	"github.com/spf13/cobra"
)

// commandOptions is the shape of a command that keeps its flags and
// arguments in a struct, as kubectl's commands do: the cobra command binds
// its flags to the struct's fields, and runOptions calls the three steps in
// order.
type commandOptions interface {
	// Complete fills what flags do not: the positional arguments and
	// anything derived from them without reading a file or the cluster.
	Complete(args []string) error
	// Validate refuses flags and arguments that cannot be right, naming
	// the flag (or argument) and the rule, before anything is read or
	// written. It may keep what it parsed, such as an image reference.
	Validate() error
	// Run does the command's work: it reads the files the flags name and
	// talks to the cluster.
	Run(ctx context.Context) error
}

// runOptions is the RunE of a command built on o: Complete, Validate, then
// Run on the command's context, each error carrying an exit code (runE).
func runOptions(o commandOptions) func(*cobra.Command, []string) error {
	return runE(func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(cmd.Context())
	})
}
