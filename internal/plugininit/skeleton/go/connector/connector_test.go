package main

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"

	openfief "github.com/arkadiuss/openfief/sdk/go"
	"github.com/arkadiuss/openfief/sdk/go/delivery"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// testToken stands in for the core's token: the test's verifier accepts it
// alone, where the real one checks the core's signed token.
type testToken string

func (t testToken) Verify(token string) error {
	if token != string(t) {
		return errors.New("not the test token")
	}
	return nil
}

// TestSync calls the connector through the SDK's server, as the core does,
// and checks the delivery by the contract's rules.
func TestSync(t *testing.T) {
	c, err := newConnector(Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(openfief.NewConnectorServer("", c, testToken("core")).Handler)
	defer srv.Close()
	client := connectorv1connect.NewConnectorServiceClient(srv.Client(), srv.URL)

	req := connect.NewRequest(&connectorv1.SyncRequest{BatchId: "batch-1"})
	req.Header().Set("Authorization", "Bearer core")
	resp, err := client.Sync(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	d := resp.Msg.GetDelivery()
	if err := delivery.Validate(d); err != nil {
		t.Errorf("the delivery breaks the contract: %v", err)
	}
	if d.GetBatchId() != "batch-1" || len(d.GetFxRates()) != 1 || d.GetWatermark() == "" {
		t.Errorf("delivery = %v", d)
	}

	// A call without the core's token never reaches the connector.
	_, err = client.Sync(context.Background(), connect.NewRequest(&connectorv1.SyncRequest{BatchId: "batch-2"}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("a call without a token: %v, want Unauthenticated", err)
	}
}

func TestConfig(t *testing.T) {
	for _, bad := range []string{"usd", "EUR", "DOLLAR"} {
		if _, err := newConnector(Config{QuoteCurrency: bad}); err == nil {
			t.Errorf("quoteCurrency %q accepted", bad)
		}
	}
}
