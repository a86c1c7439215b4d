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
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1/viewv1connect"
)

// DrainTimeout is how long ServeConnector lets calls in flight finish after
// its context is done, before it closes their connections (the core
// retries a batch whose call was cut).
const DrainTimeout = 20 * time.Second

// ServeConnector is a connector's whole serving side: it builds the
// CoreVerifier (NewCoreVerifier), takes its listener (Listen: the port of
// ListenAddress, or the listener the local runner hands down), serves
// handler with NewConnectorServer until ctx is done, then stops taking
// calls and lets those in flight finish for up to DrainTimeout. It returns
// nil after a clean drain.
func ServeConnector(ctx context.Context, handler connectorv1connect.ConnectorServiceHandler) error {
	return listenAndServe(ctx, func(addr string, verifier CoreVerifier) *http.Server {
		return NewConnectorServer(addr, handler, verifier)
	})
}

// ServeView is a view's whole serving side, as ServeConnector is a
// connector's: the CoreVerifier, the listener (Listen), NewViewServer until ctx
// is done, then a drain of up to DrainTimeout. A page cut by the drain is
// sent again by the core: it moves the view's place only after an OK.
func ServeView(ctx context.Context, handler viewv1connect.ViewServiceHandler) error {
	return listenAndServe(ctx, func(addr string, verifier CoreVerifier) *http.Server {
		return NewViewServer(addr, handler, verifier)
	})
}

// listenAndServe builds the CoreVerifier, takes the listener (Listen) and
// serves the server newServer builds until ctx is done.
func listenAndServe(ctx context.Context, newServer func(addr string, verifier CoreVerifier) *http.Server) error {
	verifier, err := NewCoreVerifier()
	if err != nil {
		return err
	}
	ln, err := Listen()
	if err != nil {
		return err
	}
	return serve(ctx, newServer(ln.Addr().String(), verifier), ln, DrainTimeout)
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
