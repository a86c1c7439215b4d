// This program is an OpenFief connector plugin, started from `openfief
// plugin init`: main reads the instance's config and serves the connector
// contract to the core until the pod is stopped. The connector itself is in
// connector.go.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	openfief "github.com/arkadiuss/openfief/sdk/go"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	// The config the owner gave the instance, already checked against
	// manifest.json's configSchema by the operator.
	var cfg Config
	if err := openfief.LoadConfig(&cfg); err != nil {
		return err
	}
	c, err := newConnector(cfg)
	if err != nil {
		return err
	}
	// ServeConnector verifies that every call comes from the core and, on
	// SIGTERM, lets the calls in flight finish before it returns.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return openfief.ServeConnector(ctx, c)
}
