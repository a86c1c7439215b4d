// Command nosigterm ignores SIGTERM and serves on: the sigterm check must
// fail.
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

func main() {
	signal.Ignore(syscall.SIGTERM)
	ctx := context.Background()
	if err := openfief.ServeConnector(ctx, connector{}); err != nil {
		os.Exit(1)
	}
}
