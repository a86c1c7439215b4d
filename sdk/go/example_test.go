// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"connectrpc.com/connect"

	openfief "github.com/arkadiuss/openfief/sdk/go"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// fxConnector is a connector that reports exchange rates. Embedding the
// generated Unimplemented handler answers Unimplemented to ImportFile.
type fxConnector struct {
	connectorv1connect.UnimplementedConnectorServiceHandler
}

// Sync answers one sync: the batch ID echoed, the institution, the rates
// as decimal strings and the new watermark.
func (fxConnector) Sync(_ context.Context, req *connect.Request[connectorv1.SyncRequest]) (*connect.Response[connectorv1.SyncResponse], error) {
	return connect.NewResponse(&connectorv1.SyncResponse{Delivery: &connectorv1.Delivery{
		BatchId:     req.Msg.GetBatchId(),
		Institution: &connectorv1.Institution{Id: "nbp", Name: "Narodowy Bank Polski"},
		FxRates: []*connectorv1.FxRate{
			{Date: "2026-03-31", BaseCurrency: "EUR", QuoteCurrency: "PLN", Rate: "4.2843", SourceRef: "063/A/NBP/2026"},
		},
		Watermark: "2026-03-31",
	}}), nil
}

// A connector answers the core's Sync with a Delivery. Here the core's call
// is made directly, as a connector's own tests do; ExampleServeConnector
// shows how the plugin's main serves it.
func Example() {
	resp, err := fxConnector{}.Sync(context.Background(), connect.NewRequest(&connectorv1.SyncRequest{
		BatchId:   "batch-1",
		Watermark: "2026-03-30",
	}))
	if err != nil {
		log.Fatal(err)
	}
	d := resp.Msg.GetDelivery()
	for _, r := range d.GetFxRates() {
		fmt.Printf("%s: 1 %s = %s %s\n", r.GetDate(), r.GetBaseCurrency(), r.GetRate(), r.GetQuoteCurrency())
	}
	fmt.Println("batch:", d.GetBatchId(), "watermark:", d.GetWatermark())
	// Output:
	// 2026-03-31: 1 EUR = 4.2843 PLN
	// batch: batch-1 watermark: 2026-03-31
}

// A connector's whole main: ServeConnector reads the environment the
// operator set, verifies that every call comes from the core, and drains
// calls in flight when the pod is stopped.
func ExampleServeConnector() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := openfief.ServeConnector(ctx, fxConnector{}); err != nil {
		log.Fatal(err)
	}
}
