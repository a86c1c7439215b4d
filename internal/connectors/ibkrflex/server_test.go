package ibkrflex

import (
	"context"
	"errors"
	"io"
	"testing"

	"connectrpc.com/connect"

	"github.com/arkadiuss/openfief/internal/connectors/connectortest"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// TestThroughSDKServer runs one Sync and one ImportFile of the same
// statement through the SDK's server: both map it the same way.
func TestThroughSDKServer(t *testing.T) {
	fake := newFakeFlex(t)
	fake.notReady = 1
	client := connectortest.Serve(t, newTestConnector(t, fake, writeCredentials(t, testToken, testQuery), 2))["grpc"]

	req := connect.NewRequest(&connectorv1.SyncRequest{BatchId: "batch-9", Watermark: "w1"})
	if _, err := client.Sync(context.Background(), req); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("without the core's token: %v, want Unauthenticated", err)
	}
	req.Header().Set("Authorization", connectortest.Authorization)
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
	stream.RequestHeader().Set("Authorization", connectortest.Authorization)
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
	client := connectortest.Serve(t, newTestConnector(t, newFakeFlex(t), t.TempDir(), 0))["grpc"]
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
			stream.RequestHeader().Set("Authorization", connectortest.Authorization)
			// Send fails with io.EOF once the server answered; the answer is
			// what CloseAndReceive returns.
			for _, msg := range []*connectorv1.ImportFileRequest{
				{Message: &connectorv1.ImportFileRequest_Header{Header: &connectorv1.FileHeader{BatchId: "b", Mode: connectorv1.IngestMode_INGEST_MODE_IMPORT}}},
				{Message: &connectorv1.ImportFileRequest_Chunk{Chunk: readTestdata(t, tc.file)}},
			} {
				if err := stream.Send(msg); err != nil && !errors.Is(err, io.EOF) {
					t.Fatalf("Send: %v", err)
				}
			}
			_, err := stream.CloseAndReceive()
			if connect.CodeOf(err) != tc.want {
				t.Errorf("ImportFile: %v, want %v", err, tc.want)
			}
		})
	}
}
