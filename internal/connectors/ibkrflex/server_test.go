package ibkrflex

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

// serveSDK serves c with the SDK's real connector server and returns a
// client of it over gRPC (h2c), as the core calls it.
func serveSDK(t *testing.T, c *Connector) connectorv1connect.ConnectorServiceClient {
	t.Helper()
	srv := openfief.NewConnectorServer("127.0.0.1:0", c, tokenVerifier("core-token"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	return connectorv1connect.NewConnectorServiceClient(&http.Client{Transport: &http.Transport{Protocols: &h2c}}, "http://"+ln.Addr().String(), connect.WithGRPC())
}

// TestThroughSDKServer runs one Sync and one ImportFile of the same
// statement through the SDK's server: both map it the same way.
func TestThroughSDKServer(t *testing.T) {
	fake := newFakeFlex(t)
	fake.notReady = 1
	client := serveSDK(t, newTestConnector(t, fake, writeCredentials(t, testToken, testQuery), 2))

	req := connect.NewRequest(&connectorv1.SyncRequest{BatchId: "batch-9", Watermark: "w1"})
	if _, err := client.Sync(context.Background(), req); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("without the core's token: %v, want Unauthenticated", err)
	}
	req.Header().Set("Authorization", "Bearer core-token")
	resp, err := client.Sync(context.Background(), req)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	synced := resp.Msg.GetDelivery()
	checkStatementDelivery(t, synced)
	if synced.GetBatchId() != "batch-9" || synced.GetWatermark() != "w1" {
		t.Errorf("batch %q watermark %q", synced.GetBatchId(), synced.GetWatermark())
	}

	stream := client.ImportFile(context.Background())
	stream.RequestHeader().Set("Authorization", "Bearer core-token")
	content := readTestdata(t, "statement.xml")
	msgs := []*connectorv1.ImportFileRequest{{Message: &connectorv1.ImportFileRequest_Header{Header: &connectorv1.FileHeader{
		BatchId: "batch-10", Mode: connectorv1.IngestMode_INGEST_MODE_PREVIEW, FileName: "flex.xml", MediaType: "application/xml",
	}}}}
	for len(content) > 0 {
		n := min(len(content), 1000)
		msgs = append(msgs, &connectorv1.ImportFileRequest{Message: &connectorv1.ImportFileRequest_Chunk{Chunk: content[:n]}})
		content = content[n:]
	}
	for _, m := range msgs {
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	iresp, err := stream.CloseAndReceive()
	if err != nil {
		t.Fatalf("ImportFile: %v", err)
	}
	imported := iresp.Msg.GetDelivery()
	checkStatementDelivery(t, imported)
	if imported.GetBatchId() != "batch-10" || imported.GetWatermark() != "" {
		t.Errorf("batch %q watermark %q", imported.GetBatchId(), imported.GetWatermark())
	}
}

func TestImportFileErrors(t *testing.T) {
	client := serveSDK(t, newTestConnector(t, newFakeFlex(t), t.TempDir(), 0))
	for name, tc := range map[string]struct {
		file string
		want connect.Code
	}{
		"a truncated statement":            {"statement-truncated.xml", connect.CodeInvalidArgument},
		"a status answer, not a statement": {"token-expired.xml", connect.CodeInvalidArgument},
		"HTML":                             {"html.html", connect.CodeInvalidArgument},
	} {
		t.Run(name, func(t *testing.T) {
			stream := client.ImportFile(context.Background())
			stream.RequestHeader().Set("Authorization", "Bearer core-token")
			stream.Send(&connectorv1.ImportFileRequest{Message: &connectorv1.ImportFileRequest_Header{Header: &connectorv1.FileHeader{BatchId: "b", Mode: connectorv1.IngestMode_INGEST_MODE_IMPORT}}})
			stream.Send(&connectorv1.ImportFileRequest{Message: &connectorv1.ImportFileRequest_Chunk{Chunk: readTestdata(t, tc.file)}})
			_, err := stream.CloseAndReceive()
			if connect.CodeOf(err) != tc.want {
				t.Errorf("ImportFile: %v, want %v", err, tc.want)
			}
		})
	}
}
