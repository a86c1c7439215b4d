package nbpfx

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	openfief "github.com/arkadiuss/openfief/sdk/go"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// tokenVerifier is a CoreVerifier that accepts one token, standing in for
// the SDK's JWKSVerifier, which the SDK's own tests cover.
type tokenVerifier string

func (v tokenVerifier) Verify(token string) error {
	if token != string(v) {
		return errors.New("not the core's token")
	}
	return nil
}

// TestSyncThroughSDKServer serves the connector with the SDK's real
// connector server (h2c, RequireCore) and calls Sync as the core does, over
// gRPC and Connect, with and without the core's token.
func TestSyncThroughSDKServer(t *testing.T) {
	fake := newFakeNBP(t)
	c := newTestConnector(t, fake, Config{Currencies: []string{"EUR"}}, "2026-03-31T20:00:00Z")
	srv := openfief.NewConnectorServer("127.0.0.1:0", c, tokenVerifier("core-token"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	base := "http://" + ln.Addr().String()

	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	grpcHTTP := &http.Client{Transport: &http.Transport{Protocols: &h2c}}
	clients := map[string]connectorv1connect.ConnectorServiceClient{
		"connect": connectorv1connect.NewConnectorServiceClient(http.DefaultClient, base),
		"grpc":    connectorv1connect.NewConnectorServiceClient(grpcHTTP, base, connect.WithGRPC()),
	}
	for name, client := range clients {
		t.Run(name, func(t *testing.T) {
			req := connect.NewRequest(&connectorv1.SyncRequest{BatchId: "batch-7", Watermark: "2026-03-27"})
			if _, err := client.Sync(context.Background(), req); connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("without the core's token: %v, want Unauthenticated", err)
			}
			req.Header().Set("Authorization", "Bearer core-token")
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
