// Command directnet tries a DNS query and a direct connection at its start,
// then serves as it should: the network check must fail where the runtime
// sees the plugin's network (the sandbox).
package main

import (
	"context"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

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
	_, _ = net.DefaultResolver.LookupHost(context.Background(), "direct.example.com")
	if c, err := net.DialTimeout("tcp", "192.0.2.10:443", 2*time.Second); err == nil {
		_ = c.Close()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := openfief.ServeConnector(ctx, connector{}); err != nil {
		os.Exit(1)
	}
}
