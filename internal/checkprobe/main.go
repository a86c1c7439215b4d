package checkprobe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/arkadiuss/openfief/internal/check/probewire"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// DefaultListenPort is the port served when plugins.EnvListenPort is unset.
const DefaultListenPort = 8080

const usage = "usage: check-probe              serve on $" + plugins.EnvListenPort + " until SIGTERM\n" +
	"       check-probe run REQUEST_JSON   try each cell once and print the results as JSON\n" +
	"       check-probe at-start           print what the config's at-start cells saw\n" +
	"       check-probe gate [--timeout D] [--rounds N] [--deadline D] TARGET...\n" +
	"                                      wait until every target is blocked (the isolation gate)"

// Main is the probe's command line: no arguments serves (Serve) on the port
// getenv names until ctx ends, after starting the config's at-start cells
// (`at-start` prints what they saw); `run REQUEST_JSON` tries the request's cells
// and prints one probewire.Response on stdout; `gate ...` is the isolation
// gate the operator runs before every plugin's container (OF-42). It
// returns the exit code (probewire.ExitOK, ExitFailed, ExitBadRequest).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	switch {
	case len(args) == 0:
		return serveMain(ctx, stderr, getenv)
	case len(args) == 1 && args[0] == probewire.AtStart:
		return atStartMain(stdout, stderr, getenv)
	case len(args) >= 1 && args[0] == plugins.GateVerb:
		return gateMain(ctx, args[1:], stdout, stderr, getenv)
	case len(args) == 2 && args[0] == probewire.Run:
		r, err := parseRequest(args[1])
		if err != nil {
			fmt.Fprintln(stderr, "check-probe: bad request:", err)
			return probewire.ExitBadRequest
		}
		raw, err := json.Marshal(run(ctx, r, EnvFrom(getenv)))
		if err != nil {
			fmt.Fprintln(stderr, "check-probe:", err)
			return probewire.ExitFailed
		}
		if _, err := fmt.Fprintf(stdout, "%s\n", raw); err != nil {
			fmt.Fprintln(stderr, "check-probe: write the results:", err)
			return probewire.ExitFailed
		}
		return probewire.ExitOK
	}
	fmt.Fprintln(stderr, usage)
	return probewire.ExitBadRequest
}

// serveMain listens on the port of plugins.EnvListenPort (default
// DefaultListenPort) and serves until ctx ends.
func serveMain(ctx context.Context, stderr io.Writer, getenv func(string) string) int {
	startAtStart(ctx, stderr, getenv) // first: its window starts with the process
	port := DefaultListenPort
	if v := getenv(plugins.EnvListenPort); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > 65535 {
			fmt.Fprintf(stderr, "check-probe: %s=%q is not a port\n", plugins.EnvListenPort, v)
			return probewire.ExitFailed
		}
		port = p
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", ":"+strconv.Itoa(port))
	if err != nil {
		fmt.Fprintln(stderr, "check-probe:", err)
		return probewire.ExitFailed
	}
	if err := Serve(ctx, ln); err != nil {
		fmt.Fprintln(stderr, "check-probe:", err)
		return probewire.ExitFailed
	}
	return probewire.ExitOK
}
