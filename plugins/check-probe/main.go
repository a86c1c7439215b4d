// Command check-probe is the program of OpenFief's check probe image
// (OF-29): `openfief check --isolation` installs it as two Plugins, through
// the operator, and execs `/check-probe run REQUEST_JSON` in their pods to
// see what a plugin can reach. Without arguments it serves a short HTTP
// reply on OPENFIEF_LISTEN_PORT until SIGTERM. See internal/checkprobe.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/arkadiuss/openfief/internal/checkprobe"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := checkprobe.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
