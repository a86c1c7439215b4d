// Command ibkr-flex is OpenFief's first-party connector plugin for
// Interactive Brokers' Flex Web Service (D-49). It wires the adapter in
// internal/connectors/ibkrflex to the Go SDK: the instance's config from
// OPENFIEF_CONFIG, the Flex token and query ID read from the
// ibkr-flex-credentials Secret (mounted at /etc/openfief/ibkr-flex) on every
// sync, IBKR reached only through the SDK's egress client (HTTPS_PROXY and
// OPENFIEF_EGRESS_TOKEN_FILE, D-63), and the core served with
// openfief.ServeConnector (D-59). It logs nothing but a fatal start-up
// error, which never holds a credential.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	openfief "github.com/arkadiuss/openfief/sdk/go"

	"github.com/arkadiuss/openfief/internal/connectors/ibkrflex"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ibkr-flex:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg ibkrflex.Config
	if err := openfief.LoadConfig(&cfg); err != nil {
		return err
	}
	client, err := openfief.NewEgressClient()
	if err != nil {
		return err
	}
	c, err := ibkrflex.New(cfg, ibkrflex.WithHTTPClient(client))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return openfief.ServeConnector(ctx, c)
}
