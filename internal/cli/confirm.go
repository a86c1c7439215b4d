package cli

import (
	"bufio"
	"fmt"
	"strings"
)

// confirm asks "question [y/N]" on the streams unless yes is set. Where
// nobody can answer it refuses rather than assume (fail closed); anything
// but y or yes declines. Both refusals exit with ExitNotConfirmed.
func (e *Env) confirm(yes bool, question string) error {
	if yes {
		return nil
	}
	if !e.Interactive {
		return exitf(ExitNotConfirmed, "%s needs confirmation, and standard input is not a terminal: rerun with --yes to confirm", strings.TrimSuffix(question, "?"))
	}
	fmt.Fprintf(e.Out, "%s [y/N]: ", question)
	line, err := bufio.NewReader(e.In).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(e.Out)
		return exitf(ExitNotConfirmed, "no answer: %w", errAborted)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return exitf(ExitNotConfirmed, "%s: %w; nothing was changed", strings.TrimSuffix(question, "?"), errAborted)
}
