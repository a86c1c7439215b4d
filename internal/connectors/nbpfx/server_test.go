package nbpfx

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	"github.com/arkadiuss/openfief/internal/connectors/connectortest"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// TestSyncThroughSDKServer serves the connector with the SDK's real
// connector server (h2c, RequireCore) and calls Sync as the core does, over
// gRPC and Connect, with and without the core's token.
func TestSyncThroughSDKServer(t *testing.T) {
	fake := newFakeNBP(t)
	c := newTestConnector(t, fake, Config{Currencies: []string{"EUR"}}, "2026-03-31T20:00:00Z")
	clients := connectortest.Serve(t, c)
	for name, client := range clients {
		t.Run(name, func(t *testing.T) {
			req := connect.NewRequest(&connectorv1.SyncRequest{BatchId: "batch-7", Watermark: "2026-03-27"})
			if _, err := client.Sync(context.Background(), req); connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("without the core's token: %v, want Unauthenticated", err)
			}
			req.Header().Set("Authorization", connectortest.Authorization)
			resp, err := client.Sync(context.Background(), req)
			if err != nil {
				t.Fatalf("Sync: %v", err)
			}
			d := resp.Msg.GetDelivery()
			got := rates(d)
			want := []string{"2026-03-30 EUR 4.2845 062/A/NBP/2026", "2026-03-31 EUR 4.2840 063/A/NBP/2026"}
			if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
				t.Errorf("rates = %q, want %q", got, want)
			}
			if d.GetBatchId() != "batch-7" || d.GetWatermark() != "2026-03-31" {
				t.Errorf("batch %q watermark %q", d.GetBatchId(), d.GetWatermark())
			}
		})
	}
}
