// Command noauth serves the connector contract without the SDK's token
// check, answering anyone: the auth check must fail.
package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"connectrpc.com/connect"

	openfief "github.com/arkadiuss/openfief/sdk/go"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

type connector struct {
	connectorv1connect.UnimplementedConnectorServiceHandler
}

func (connector) Sync(_ context.Context, req *connect.Request[connectorv1.SyncRequest]) (*connect.Response[connectorv1.SyncResponse], error) {
	return connect.NewResponse(&connectorv1.SyncResponse{Delivery: &connectorv1.Delivery{
		BatchId:     req.Msg.GetBatchId(),
		Institution: &connectorv1.Institution{Id: "broken", Name: "Broken"},
	}}), nil
}

func main() {
	ln, err := openfief.Listen()
	if err != nil {
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.Handle(connectorv1connect.NewConnectorServiceHandler(connector{}))
	var h2c http.Protocols
	h2c.SetHTTP1(true)
	h2c.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: &h2c}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		os.Exit(1)
	}
}
