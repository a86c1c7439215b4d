// Command nbp-fx is OpenFief's first-party connector plugin for Narodowy
// Bank Polski's exchange rates (D-49). It wires the adapter in
// internal/connectors/nbpfx to the Go SDK: the instance's config from
// OPENFIEF_CONFIG, NBP reached only through the SDK's egress client
// (HTTPS_PROXY and OPENFIEF_EGRESS_TOKEN_FILE, D-63), and the core served
// with openfief.ServeConnector (D-59).
//
// TLS to NBP uses the system's roots; a test run may point SSL_CERT_FILE at
// a fake's CA bundle, which Go honours, together with the config field
// baseURL. See internal/connectors/nbpfx.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	openfief "github.com/arkadiuss/openfief/sdk/go"

	"github.com/arkadiuss/openfief/internal/connectors/nbpfx"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "nbp-fx:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg nbpfx.Config
	if err := openfief.LoadConfig(&cfg); err != nil {
		return err
	}
	client, err := openfief.NewEgressClient()
	if err != nil {
		return err
	}
	c, err := nbpfx.New(cfg, nbpfx.WithHTTPClient(client))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return openfief.ServeConnector(ctx, c)
}
