package main

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"github.com/arkadiuss/openfief/sdk/go/delivery"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// institution is where the connector's data comes from. Name yours.
var institution = &connectorv1.Institution{Id: "example-bank", Name: "Example Bank"}

// Config is the instance's config, as manifest.json's configSchema
// describes it. LoadConfig refuses a field this struct does not have.
type Config struct {
	// QuoteCurrency is the currency the example rate is quoted in; USD when
	// empty.
	QuoteCurrency string `json:"quoteCurrency"`
}

// connector answers the core's calls. The embedded Unimplemented handler
// answers ImportFile with Unimplemented until you write it (see
// openfief.ReceiveFile).
type connector struct {
	connectorv1connect.UnimplementedConnectorServiceHandler
	config Config
}

// newConnector checks the config again, for the fields it uses.
func newConnector(cfg Config) (*connector, error) {
	if cfg.QuoteCurrency == "" {
		cfg.QuoteCurrency = "USD"
	}
	if !delivery.IsCurrency(cfg.QuoteCurrency) || cfg.QuoteCurrency == "EUR" {
		return nil, fmt.Errorf("config quoteCurrency: %q is not an ISO 4217 code other than EUR", cfg.QuoteCurrency)
	}
	return &connector{config: cfg}, nil
}

// Sync answers one sync with a Delivery: the request's batch ID, the
// institution, what was read, and the watermark the core passes back next
// time. This one delivers a made-up exchange rate. A real connector reads
// its institution through the egress proxy: openfief.NewEgressClient(),
// with the host listed in manifest.json's "egress".
func (c *connector) Sync(_ context.Context, req *connect.Request[connectorv1.SyncRequest]) (*connect.Response[connectorv1.SyncResponse], error) {
	b := delivery.NewBuilder(req.Msg.GetBatchId(), institution)
	b.FxRate(&connectorv1.FxRate{
		Date:          "2026-01-02",
		BaseCurrency:  "EUR",
		QuoteCurrency: c.config.QuoteCurrency,
		Rate:          "1.0350",
		SourceRef:     "example",
	})
	d, err := b.Build("2026-01-02")
	if err != nil {
		// Build checks every field by the contract's rules.
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return connect.NewResponse(&connectorv1.SyncResponse{Delivery: d}), nil
}
