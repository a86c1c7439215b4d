// Command openfief is the owner's command line for OpenFief plugins (D-46):
// verify, install, upgrade, approve, revoke, list, status and uninstall.
// Everything lives in internal/cli; docs/cli.md documents the commands,
// flags and exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/arkadiuss/openfief/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.StdStreams())
	stop()
	os.Exit(code)
}
