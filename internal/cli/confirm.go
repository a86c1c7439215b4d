package cli

import (
	"bufio"
	"context"
	"fmt"
	"strings"
)

// confirm asks "question [y/N]" on the streams unless yes is set; action
// names the change in errors ("approving plugin fx"). Where
// nobody can answer it refuses rather than assume (fail closed); anything
// but y or yes declines, and so does an interrupt (ctx done) while it waits.
// Every refusal exits with ExitNotConfirmed.
func (e *Env) confirm(ctx context.Context, yes bool, question, action string) error {
	if yes {
		return nil
	}
	if !e.Interactive {
		return exitf(ExitNotConfirmed, "%s needs confirmation, and standard input is not a terminal: rerun with --yes to confirm", action)
	}
	fmt.Fprintf(e.Out, "%s [y/N]: ", question)
	type answer struct {
		line string
		err  error
	}
	answers := make(chan answer, 1)
	go func() {
		line, err := bufio.NewReader(e.In).ReadString('\n')
		answers <- answer{line, err}
	}()
	var a answer
	select {
	case a = <-answers:
	case <-ctx.Done():
		fmt.Fprintln(e.Out)
		return exitf(ExitNotConfirmed, "interrupted: %w; nothing was changed", errAborted)
	}
	if a.err != nil && a.line == "" {
		fmt.Fprintln(e.Out)
		return exitf(ExitNotConfirmed, "no answer: %w; nothing was changed", errAborted)
	}
	switch strings.ToLower(strings.TrimSpace(a.line)) {
	case "y", "yes":
		return nil
	}
	return exitf(ExitNotConfirmed, "%s: %w; nothing was changed", action, errAborted)
}
