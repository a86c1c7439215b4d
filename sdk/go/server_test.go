// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"github.com/go-jose/go-jose/v4/jwt"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
	viewv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1/viewv1connect"
)

// fakeConnector answers Sync with a fixed delivery and ImportFile with a
// delivery that reports the received file's size and hash.
type fakeConnector struct {
	calls atomic.Int64
	limit int64
}

func testDelivery(batchID, watermark string) *connectorv1.Delivery {
	vwce := &connectorv1.Instrument{Isin: "IE00BK5BQT80", Symbol: "VWCE", Exchange: "XETR", Currency: "EUR", Name: "Vanguard FTSE All-World"}
	return &connectorv1.Delivery{
		BatchId:     batchID,
		Institution: &connectorv1.Institution{Id: "nbp", Name: "Narodowy Bank Polski"},
		Transactions: []*connectorv1.Transaction{{
			SourceId:    "t-1",
			Date:        "2026-03-30",
			Description: "buy VWCE",
			Postings: []*connectorv1.Posting{
				{AccountId: "acc-broker", Amount: "-1000.10", Currency: "EUR"},
				{AccountId: "acc-vwce", Amount: "1000.10", Currency: "EUR", Instrument: vwce, Quantity: "8.5"},
			},
		}},
		BalanceAssertions: []*connectorv1.BalanceAssertion{{AccountId: "acc-broker", Date: "2026-03-30", Amount: "0.30", Currency: "EUR"}},
		Problems:          []*connectorv1.IngestProblem{{Severity: connectorv1.Severity_SEVERITY_WARNING, Code: "rounded", Message: "rounded as the broker did"}},
		Prices:            []*connectorv1.Price{{Instrument: vwce, Date: "2026-03-30", Price: "117.66", Currency: "EUR"}},
		FxRates:           []*connectorv1.FxRate{{Date: "2026-03-30", BaseCurrency: "EUR", QuoteCurrency: "PLN", Rate: "4.2843", SourceRef: "062/A/NBP/2026"}},
		IndexReadings:     []*connectorv1.IndexReading{{IndexId: "gus.cpi.yoy", Date: "2026-02-01", Value: "103.1"}},
		Watermark:         watermark,
	}
}

func (c *fakeConnector) Sync(_ context.Context, req *connect.Request[connectorv1.SyncRequest]) (*connect.Response[connectorv1.SyncResponse], error) {
	c.calls.Add(1)
	return connect.NewResponse(&connectorv1.SyncResponse{Delivery: testDelivery(req.Msg.GetBatchId(), "2026-03-30")}), nil
}

func (c *fakeConnector) ImportFile(_ context.Context, stream *connect.ClientStream[connectorv1.ImportFileRequest]) (*connect.Response[connectorv1.ImportFileResponse], error) {
	c.calls.Add(1)
	f, err := ReceiveFile(stream, c.limit)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(f.Content)
	d := &connectorv1.Delivery{
		BatchId: f.Header.GetBatchId(),
		Problems: []*connectorv1.IngestProblem{{
			Severity: connectorv1.Severity_SEVERITY_WARNING,
			Code:     "received",
			Message:  fmt.Sprintf("%s %s %s %d bytes", f.Header.GetMode(), f.Header.GetFileName(), f.Header.GetMediaType(), len(f.Content)),
			Location: hex.EncodeToString(sum[:]),
		}},
	}
	return connect.NewResponse(&connectorv1.ImportFileResponse{Delivery: d}), nil
}

// testServer is a connector served by NewConnectorServer on a real
// loopback TCP port, with a verifier over a JWKS directory.
type testServer struct {
	url       string
	connector *fakeConnector
	protos    chan int // ProtoMajor of each request that reached the server
}

func startConnector(t *testing.T, verifier CoreVerifier) *testServer {
	t.Helper()
	ts := &testServer{connector: &fakeConnector{limit: 1 << 20}, protos: make(chan int, 100)}
	srv := NewConnectorServer("127.0.0.1:0", ts.connector, verifier)
	inner := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case ts.protos <- r.ProtoMajor:
		default:
		}
		inner.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveUntilCleanup(t, srv, ln)
	ts.url = "http://" + ln.Addr().String()
	return ts
}

// bearer adds a fixed Authorization header, as the core does.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.base.RoundTrip(r)
}

// h2cClient speaks HTTP/2 without TLS, as the core does to stream files.
func h2cClient(token string) *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p, Proxy: nil}
	return &http.Client{Transport: bearer{token: token, base: tr}}
}

// http1Client speaks HTTP/1.1 only.
func http1Client(token string) *http.Client {
	tr := &http.Transport{Proxy: nil}
	return &http.Client{Transport: bearer{token: token, base: tr}}
}

func coreDir(t *testing.T) (*jwksDir, string) {
	d := newJWKSDir(t, testIssuer, allKeys()...)
	return d, ec256.sign(t, validClaims())
}

// TestConnectorServerSync checks the contract's messages travel unchanged:
// Connect, gRPC, gRPC-Web and JSON clients all get the same Delivery from one
// server, over HTTP/2 without TLS and, for unary calls, HTTP/1.1.
func TestConnectorServerSync(t *testing.T) {
	d, token := coreDir(t)
	ts := startConnector(t, d.verifier())
	want := testDelivery("batch-42", "2026-03-30")
	clients := map[string]struct {
		client *http.Client
		opts   []connect.ClientOption
		proto  int
	}{
		"connect proto h2c": {h2cClient(token), nil, 2},
		"connect JSON h2c":  {h2cClient(token), []connect.ClientOption{connect.WithProtoJSON()}, 2},
		"gRPC h2c":          {h2cClient(token), []connect.ClientOption{connect.WithGRPC()}, 2},
		"gRPC-Web h2c":      {h2cClient(token), []connect.ClientOption{connect.WithGRPCWeb()}, 2},
		"connect HTTP/1.1":  {http1Client(token), nil, 1},
		"JSON HTTP/1.1":     {http1Client(token), []connect.ClientOption{connect.WithProtoJSON()}, 1},
	}
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			client := connectorv1connect.NewConnectorServiceClient(c.client, ts.url, c.opts...)
			resp, err := client.Sync(context.Background(), connect.NewRequest(&connectorv1.SyncRequest{BatchId: "batch-42", Watermark: "2026-03-29"}))
			if err != nil {
				t.Fatalf("Sync: %v", err)
			}
			if got := resp.Msg.GetDelivery(); !proto.Equal(got, want) {
				t.Fatalf("Delivery differs:\n got %s\nwant %s", protojson.Format(got), protojson.Format(want))
			}
			if got := <-ts.protos; got != c.proto {
				t.Fatalf("request used HTTP/%d, want HTTP/%d", got, c.proto)
			}
		})
	}
}

// TestConnectorServerSyncJSONOverPlainHTTP calls Sync the way a person
// would with curl: a POST of JSON, no Connect client at all.
func TestConnectorServerSyncJSONOverPlainHTTP(t *testing.T) {
	d, token := coreDir(t)
	ts := startConnector(t, d.verifier())
	req, err := http.NewRequest(http.MethodPost, ts.url+connectorv1connect.ConnectorServiceSyncProcedure, strings.NewReader(`{"batchId":"b-7","watermark":""}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http1Client(token).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var got connectorv1.SyncResponse
	var body bytes.Buffer
	if _, err := body.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if want := testDelivery("b-7", "2026-03-30"); !proto.Equal(got.GetDelivery(), want) {
		t.Fatalf("Delivery differs:\n got %s\nwant %s", protojson.Format(got.GetDelivery()), protojson.Format(want))
	}
}

func TestConnectorServerImportFileStreams(t *testing.T) {
	d, token := coreDir(t)
	ts := startConnector(t, d.verifier())
	for name, opts := range map[string][]connect.ClientOption{
		"connect": nil,
		"gRPC":    {connect.WithGRPC()},
	} {
		t.Run(name, func(t *testing.T) {
			client := connectorv1connect.NewConnectorServiceClient(h2cClient(token), ts.url, opts...)
			stream := client.ImportFile(context.Background())
			header := &connectorv1.FileHeader{BatchId: "b-9", Mode: connectorv1.IngestMode_INGEST_MODE_PREVIEW, FileName: "statement.xml", MediaType: "application/xml"}
			if err := stream.Send(&connectorv1.ImportFileRequest{Message: &connectorv1.ImportFileRequest_Header{Header: header}}); err != nil {
				t.Fatal(err)
			}
			var content []byte
			for i := range 40 {
				chunk := bytes.Repeat([]byte{byte('a' + i%26)}, 10_000+i)
				content = append(content, chunk...)
				if err := stream.Send(&connectorv1.ImportFileRequest{Message: &connectorv1.ImportFileRequest_Chunk{Chunk: chunk}}); err != nil {
					t.Fatal(err)
				}
			}
			resp, err := stream.CloseAndReceive()
			if err != nil {
				t.Fatalf("ImportFile: %v", err)
			}
			p := resp.Msg.GetDelivery().GetProblems()[0]
			sum := sha256.Sum256(content)
			if want := fmt.Sprintf("INGEST_MODE_PREVIEW statement.xml application/xml %d bytes", len(content)); p.GetMessage() != want {
				t.Fatalf("connector saw %q, want %q", p.GetMessage(), want)
			}
			if p.GetLocation() != hex.EncodeToString(sum[:]) {
				t.Fatal("connector received other bytes than were sent")
			}
			if resp.Msg.GetDelivery().GetBatchId() != "b-9" {
				t.Fatalf("batch ID %q, want b-9", resp.Msg.GetDelivery().GetBatchId())
			}
		})
	}
}

func TestConnectorServerImportFileTooLarge(t *testing.T) {
	d, token := coreDir(t)
	ts := startConnector(t, d.verifier())
	client := connectorv1connect.NewConnectorServiceClient(h2cClient(token), ts.url)
	stream := client.ImportFile(context.Background())
	header := &connectorv1.FileHeader{BatchId: "b", Mode: connectorv1.IngestMode_INGEST_MODE_IMPORT}
	if err := stream.Send(&connectorv1.ImportFileRequest{Message: &connectorv1.ImportFileRequest_Header{Header: header}}); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for range 17 { // 17 × 64 KiB > the fake's 1 MiB limit
		if err := stream.Send(&connectorv1.ImportFileRequest{Message: &connectorv1.ImportFileRequest_Chunk{Chunk: chunk}}); err != nil {
			break // the server may answer and close before every chunk is sent
		}
	}
	_, err := stream.CloseAndReceive()
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("ImportFile = %v, want ResourceExhausted", err)
	}
}

// fakeView keeps the last page it was sent and counts its calls.
type fakeView struct {
	calls atomic.Int32
	last  atomic.Pointer[viewv1.ExportRequest]
}

func (v *fakeView) Export(_ context.Context, r *connect.Request[viewv1.ExportRequest]) (*connect.Response[viewv1.ExportResponse], error) {
	v.calls.Add(1)
	v.last.Store(r.Msg)
	return connect.NewResponse(&viewv1.ExportResponse{}), nil
}

// TestViewServer: NewViewServer hands a page sent with the core's token
// for this instance to the handler unchanged, over HTTP/1.1 and h2c; a
// token for another instance, or none, is refused before the handler.
func TestViewServer(t *testing.T) {
	d, token := coreDir(t)
	view := &fakeView{}
	srv := NewViewServer("127.0.0.1:0", view, d.verifier())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveUntilCleanup(t, srv, ln)
	url := "http://" + ln.Addr().String()
	page := &viewv1.ExportRequest{RunId: "run-1", DataTiers: []string{"accounts"}, More: true, Entries: []*viewv1.Entry{{
		Sequence: 7, Source: "nbp-fx", Institution: &connectorv1.Institution{Id: "nbp", Name: "NBP"},
		Entry: &viewv1.Entry_FxRate{FxRate: &connectorv1.FxRate{Date: "2026-03-30", BaseCurrency: "EUR", QuoteCurrency: "PLN", Rate: "4.2840"}},
	}}}
	for name, client := range map[string]viewv1connect.ViewServiceClient{
		"HTTP/1.1": viewv1connect.NewViewServiceClient(http1Client(token), url),
		"h2c":      viewv1connect.NewViewServiceClient(h2cClient(token), url, connect.WithGRPC()),
	} {
		if _, err := client.Export(context.Background(), connect.NewRequest(page)); err != nil {
			t.Fatalf("%s: Export: %v", name, err)
		}
		if got := view.last.Load(); !proto.Equal(got, page) {
			t.Errorf("%s: the view got %v, want %v", name, got, page)
		}
	}

	other := validClaims()
	other.Audience = jwt.Audience{InstanceAudience("another-view")}
	for name, tok := range map[string]string{"another instance's token": ec256.sign(t, other), "no token": ""} {
		before := view.calls.Load()
		_, err := viewv1connect.NewViewServiceClient(http1Client(tok), url).Export(context.Background(), connect.NewRequest(page))
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("%s: %v, want Unauthenticated", name, err)
		}
		if view.calls.Load() != before {
			t.Errorf("%s reached the view's handler", name)
		}
	}
}
