// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1/viewv1connect"
)

// MaxMessageBytes bounds one message the connector server reads, such as one
// ImportFile chunk. ReceiveFile's limit bounds the whole file.
const MaxMessageBytes = 4 << 20

// NewConnectorServer returns the HTTP server a connector serves the core
// with: the generated ConnectorService handler for handler, behind
// RequireCore with verifier, speaking HTTP/1.1 and HTTP/2 without TLS
// (h2c), since ImportFile streams. It serves Connect, gRPC and gRPC-Web. A
// nil verifier refuses every call. opts are passed to the generated handler.
func NewConnectorServer(addr string, handler connectorv1connect.ConnectorServiceHandler, verifier CoreVerifier, opts ...connect.HandlerOption) *http.Server {
	opts = append([]connect.HandlerOption{connect.WithReadMaxBytes(MaxMessageBytes)}, opts...)
	return newPluginServer(addr, verifier, func(mux *http.ServeMux) {
		mux.Handle(connectorv1connect.NewConnectorServiceHandler(handler, opts...))
	})
}

// MaxViewMessageBytes bounds one page the view server reads: the core's
// pages hold a bounded number of entries, each bounded by the store's
// validation.
const MaxViewMessageBytes = 16 << 20

// NewViewServer returns the HTTP server a view serves the core with: the
// generated ViewService handler for handler behind RequireCore with
// verifier, as NewConnectorServer does for a connector. A nil verifier
// refuses every call. opts are passed to the generated handler.
func NewViewServer(addr string, handler viewv1connect.ViewServiceHandler, verifier CoreVerifier, opts ...connect.HandlerOption) *http.Server {
	opts = append([]connect.HandlerOption{connect.WithReadMaxBytes(MaxViewMessageBytes)}, opts...)
	return newPluginServer(addr, verifier, func(mux *http.ServeMux) {
		mux.Handle(viewv1connect.NewViewServiceHandler(handler, opts...))
	})
}

// newPluginServer is the server both kinds of plugin serve the core with:
// the handlers register routes, all behind RequireCore, over HTTP/1.1 and
// h2c.
func newPluginServer(addr string, verifier CoreVerifier, register func(*http.ServeMux)) *http.Server {
	mux := http.NewServeMux()
	register(mux)
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Addr:              addr,
		Handler:           RequireCore(verifier, mux),
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
}
