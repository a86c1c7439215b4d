package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"connectrpc.com/connect"

	openfief "github.com/arkadiuss/openfief/sdk/go"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// echoConnector answers Sync with one FX rate and ImportFile with the
// file's SHA-256 as a problem's message, so the test sees the bytes arrived.
type echoConnector struct {
	connectorv1connect.UnimplementedConnectorServiceHandler
}

func (echoConnector) Sync(_ context.Context, req *connect.Request[connectorv1.SyncRequest]) (*connect.Response[connectorv1.SyncResponse], error) {
	d, _ := rates("2026-11-27")(context.Background(), req.Msg)
	return connect.NewResponse(&connectorv1.SyncResponse{Delivery: d}), nil
}

func (echoConnector) ImportFile(_ context.Context, stream *connect.ClientStream[connectorv1.ImportFileRequest]) (*connect.Response[connectorv1.ImportFileResponse], error) {
	f, err := openfief.ReceiveFile(stream, 1<<20)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(f.Content)
	return connect.NewResponse(&connectorv1.ImportFileResponse{Delivery: &connectorv1.Delivery{
		BatchId:     f.Header.GetBatchId(),
		Institution: &connectorv1.Institution{Id: "echo", Name: "Echo"},
		Problems: []*connectorv1.IngestProblem{{
			Code: "sha256", Message: f.Header.GetFileName() + " " + hex.EncodeToString(sum[:]),
			Severity: connectorv1.Severity_SEVERITY_WARNING,
		}},
	}}), nil
}
