// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// DrainTimeout is how long ServeConnector lets calls in flight finish after
// its context is done, before it closes their connections (the core
// retries a batch whose call was cut).
const DrainTimeout = 20 * time.Second

// ServeConnector is a connector's whole serving side: it reads
// the listen port (ListenAddress), builds the CoreVerifier (NewCoreVerifier),
// serves handler with NewConnectorServer until ctx is done, then stops taking
// calls and lets those in flight finish for up to DrainTimeout. It returns
// nil after a clean drain.
func ServeConnector(ctx context.Context, handler connectorv1connect.ConnectorServiceHandler) error {
	addr, err := ListenAddress()
	if err != nil {
		return err
	}
	verifier, err := NewCoreVerifier()
	if err != nil {
		return err
	}
	srv := NewConnectorServer(addr, handler, verifier)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	return serve(ctx, srv, ln, DrainTimeout)
}

// serve runs srv on ln until ctx is done, then shuts it down gracefully
// within drain, closing whatever is still open after that.
func serve(ctx context.Context, srv *http.Server, ln net.Listener, drain time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		// Serve never returns nil; it stopped without being asked to.
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		// Cut what did not drain; the drain's error is the one to report.
		_ = srv.Close()
		err = fmt.Errorf("drain calls in flight: %w", err)
	}
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = fmt.Errorf("serve: %w", serr)
	}
	return err
}
