package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// TestConfirm checks every way a confirmation ends: --yes, yes, other
// answers, no answer, an interrupt while waiting, and nobody to ask.
func TestConfirm(t *testing.T) {
	ask := func(ctx context.Context, in io.Reader, interactive, yes bool) int {
		env := NewEnv(Streams{In: in, Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}, Interactive: interactive})
		return ExitCode(env.confirm(ctx, yes, "Go?", "going"))
	}
	ctx := context.Background()
	cases := map[string]struct {
		in          string
		interactive bool
		yes         bool
		want        int
	}{
		"--yes":                 {yes: true, want: ExitOK},
		"--yes, no tty":         {yes: true, interactive: false, want: ExitOK},
		"y":                     {in: "y\n", interactive: true, want: ExitOK},
		"YES with spaces":       {in: "  YES \n", interactive: true, want: ExitOK},
		"yes without a newline": {in: "yes", interactive: true, want: ExitOK},
		"n":                     {in: "n\n", interactive: true, want: ExitNotConfirmed},
		"empty line":            {in: "\n", interactive: true, want: ExitNotConfirmed},
		"end of input":          {in: "", interactive: true, want: ExitNotConfirmed},
		"nobody to ask":         {in: "y\n", interactive: false, want: ExitNotConfirmed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ask(ctx, strings.NewReader(tc.in), tc.interactive, tc.yes); got != tc.want {
				t.Errorf("exit code %d, want %d", got, tc.want)
			}
		})
	}
	t.Run("interrupted while waiting", func(t *testing.T) {
		r, w := io.Pipe()
		defer func() { _ = w.Close() }() // ends ask's read; a PipeWriter's Close always returns nil
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		if got := ask(ctx, r, true, false); got != ExitNotConfirmed {
			t.Errorf("exit code %d, want %d", got, ExitNotConfirmed)
		}
	})
}
