// Command openfief is the owner's command line for OpenFief plugins (D-46):
// verify, install, upgrade, approve, revoke, list, status and uninstall,
// and `dev`, the whole platform on this machine. The commands live in
// internal/cli, `dev` in internal/devstack; docs/cli.md documents the commands,
// flags and exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/devstack"
)

func main() {
	// The CLI reports through its streams; controller-runtime's client
	// would otherwise warn that no logger was set.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.StdStreams(), devstack.NewCommand)
	stop()
	os.Exit(code)
}
