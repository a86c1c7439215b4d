// Command memoryhog holds 400 MiB from its start, far over the default
// memory limit: the resources check must fail.
package main

import (
	"context"
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
		FxRates:     []*connectorv1.FxRate{{Date: "2026-01-02", BaseCurrency: "EUR", QuoteCurrency: "PLN", Rate: "4.25"}},
	}}), nil
}

// hog stays referenced for the process's life.
var hog []byte

func main() {
	hog = make([]byte, 400<<20)
	for i := range hog {
		hog[i] = byte(i)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := openfief.ServeConnector(ctx, connector{}); err != nil {
		os.Exit(1)
	}
}
