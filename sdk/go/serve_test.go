// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
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

// TestRequireCoreRefusesBeforeTheHandler sends every refused token through
// a real client and checks each gets 401 (Unauthenticated) and that the
// connector never ran.
func TestRequireCoreRefusesBeforeTheHandler(t *testing.T) {
	d, _ := coreDir(t)
	ts := startConnector(t, d.verifier())
	for name, token := range refusedTokens(t) {
		t.Run(name, func(t *testing.T) {
			client := connectorv1connect.NewConnectorServiceClient(h2cClient(token), ts.url)
			_, err := client.Sync(context.Background(), connect.NewRequest(&connectorv1.SyncRequest{BatchId: "b"}))
			if connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("Sync = %v, want Unauthenticated", err)
			}
			stream := client.ImportFile(context.Background())
			_ = stream.Send(&connectorv1.ImportFileRequest{Message: &connectorv1.ImportFileRequest_Header{Header: &connectorv1.FileHeader{BatchId: "b"}}})
			if _, err := stream.CloseAndReceive(); connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("ImportFile = %v, want Unauthenticated", err)
			}
		})
	}
	if n := ts.connector.calls.Load(); n != 0 {
		t.Fatalf("the connector ran %d times for refused tokens", n)
	}
}

func TestRequireCoreStatusAndHeaders(t *testing.T) {
	d, token := coreDir(t)
	var ran atomic.Int64
	h := RequireCore(d.verifier(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran.Add(1) }))
	srv := &http.Server{Handler: h}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveUntilCleanup(t, srv, ln)
	url := "http://" + ln.Addr().String() + "/"
	for name, tt := range map[string]struct {
		header []string
		want   int
	}{
		"valid":                {[]string{"Bearer " + token}, http.StatusOK},
		"lower-case scheme":    {[]string{"bearer " + token}, http.StatusOK},
		"missing":              {nil, http.StatusUnauthorized},
		"basic":                {[]string{"Basic " + token}, http.StatusUnauthorized},
		"no scheme":            {[]string{token}, http.StatusUnauthorized},
		"empty bearer":         {[]string{"Bearer "}, http.StatusUnauthorized},
		"two headers":          {[]string{"Bearer " + token, "Bearer " + token}, http.StatusUnauthorized},
		"valid token, garbage": {[]string{"Bearer " + token + "x"}, http.StatusUnauthorized},
	} {
		t.Run(name, func(t *testing.T) {
			before := ran.Load()
			req, err := http.NewRequest(http.MethodGet, url, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range tt.header {
				req.Header.Add("Authorization", v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
			ranNow := ran.Load() > before
			if ranNow != (tt.want == http.StatusOK) {
				t.Fatalf("handler ran = %v for status %d", ranNow, tt.want)
			}
			if tt.want == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
	t.Run("nil verifier refuses", func(t *testing.T) {
		rec := RequireCore(nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Fatal("handler ran") }))
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		w := &statusRecorder{header: http.Header{}}
		rec.ServeHTTP(w, req)
		if w.status != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", w.status)
		}
	})
}

type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header         { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *statusRecorder) WriteHeader(s int)           { r.status = s }

// fakeStream replays messages as an ImportFile stream would deliver them.
type fakeStream struct {
	msgs []*connectorv1.ImportFileRequest
	i    int
	err  error
}

func (s *fakeStream) Receive() bool {
	if s.i >= len(s.msgs) {
		return false
	}
	s.i++
	return true
}
func (s *fakeStream) Msg() *connectorv1.ImportFileRequest { return s.msgs[s.i-1] }
func (s *fakeStream) Err() error                          { return s.err }

func hdr(batch string, mode connectorv1.IngestMode) *connectorv1.ImportFileRequest {
	return &connectorv1.ImportFileRequest{Message: &connectorv1.ImportFileRequest_Header{Header: &connectorv1.FileHeader{BatchId: batch, Mode: mode}}}
}

func chunk(s string) *connectorv1.ImportFileRequest {
	return &connectorv1.ImportFileRequest{Message: &connectorv1.ImportFileRequest_Chunk{Chunk: []byte(s)}}
}

func TestReceiveFile(t *testing.T) {
	imp := connectorv1.IngestMode_INGEST_MODE_IMPORT
	broken := errors.New("connection reset")
	tests := map[string]struct {
		msgs    []*connectorv1.ImportFileRequest
		err     error
		limit   int64
		want    string
		wantErr connect.Code
	}{
		"header and chunks":      {msgs: []*connectorv1.ImportFileRequest{hdr("b", imp), chunk("ab"), chunk(""), chunk("cd")}, limit: 4, want: "abcd"},
		"header only":            {msgs: []*connectorv1.ImportFileRequest{hdr("b", imp)}, limit: 4, want: ""},
		"unspecified mode":       {msgs: []*connectorv1.ImportFileRequest{hdr("b", 0), chunk("x")}, limit: 4, want: "x"},
		"empty stream":           {limit: 4, wantErr: connect.CodeInvalidArgument},
		"chunk first":            {msgs: []*connectorv1.ImportFileRequest{chunk("x"), hdr("b", imp)}, limit: 4, wantErr: connect.CodeInvalidArgument},
		"two headers":            {msgs: []*connectorv1.ImportFileRequest{hdr("b", imp), chunk("x"), hdr("b", imp)}, limit: 4, wantErr: connect.CodeInvalidArgument},
		"no batch ID":            {msgs: []*connectorv1.ImportFileRequest{hdr("", imp)}, limit: 4, wantErr: connect.CodeInvalidArgument},
		"unknown mode":           {msgs: []*connectorv1.ImportFileRequest{hdr("b", 99)}, limit: 4, wantErr: connect.CodeInvalidArgument},
		"empty message":          {msgs: []*connectorv1.ImportFileRequest{hdr("b", imp), {}}, limit: 4, wantErr: connect.CodeInvalidArgument},
		"nil header":             {msgs: []*connectorv1.ImportFileRequest{{Message: &connectorv1.ImportFileRequest_Header{}}}, limit: 4, wantErr: connect.CodeInvalidArgument},
		"one byte over":          {msgs: []*connectorv1.ImportFileRequest{hdr("b", imp), chunk("abc"), chunk("de")}, limit: 4, wantErr: connect.CodeResourceExhausted},
		"zero limit":             {msgs: []*connectorv1.ImportFileRequest{hdr("b", imp)}, limit: 0, wantErr: connect.CodeInternal},
		"stream error":           {msgs: []*connectorv1.ImportFileRequest{hdr("b", imp), chunk("a")}, err: broken, limit: 4, wantErr: connect.CodeUnknown},
		"exactly at the limit":   {msgs: []*connectorv1.ImportFileRequest{hdr("b", imp), chunk("abcd")}, limit: 4, want: "abcd"},
		"header after the limit": {msgs: []*connectorv1.ImportFileRequest{hdr("b", imp), chunk("abcd"), hdr("b", imp)}, limit: 4, wantErr: connect.CodeInvalidArgument},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := receiveFile(&fakeStream{msgs: tt.msgs, err: tt.err}, tt.limit)
			if tt.wantErr != 0 {
				if connect.CodeOf(err) != tt.wantErr {
					t.Fatalf("err = %v (%v), want %v", err, connect.CodeOf(err), tt.wantErr)
				}
				if f != nil {
					t.Fatal("a file came back with the error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(f.Content) != tt.want || f.Content == nil {
				t.Fatalf("content %q, want %q", f.Content, tt.want)
			}
			if f.Header.GetBatchId() != "b" {
				t.Fatalf("header %v", f.Header)
			}
		})
	}
}

// FuzzReceiveFile drives ReceiveFile with arbitrary message sequences
// encoded in data: it must never panic, never return more than the limit,
// and accept only a stream that starts with its one header.
func FuzzReceiveFile(f *testing.F) {
	f.Add([]byte{0, 1, 'a', 1, 'b'}, int64(10))
	f.Add([]byte{1, 'a', 0}, int64(10))
	f.Add([]byte{0, 0}, int64(1))
	f.Add([]byte{2, 0, 1, 'x'}, int64(1))
	f.Fuzz(func(t *testing.T, data []byte, limit int64) {
		// Each message is a kind byte (0 header, 1 chunk of the next byte,
		// 2 empty message, 3 header without batch ID) and for chunks a
		// length byte followed by that many content bytes.
		var msgs []*connectorv1.ImportFileRequest
		headers := 0
		firstIsHeader := false
		for i := 0; i < len(data); i++ {
			switch data[i] % 4 {
			case 0:
				msgs = append(msgs, hdr("b", connectorv1.IngestMode(data[i]/4%4)))
				if len(msgs) == 1 {
					firstIsHeader = true
				}
				headers++
			case 1:
				n := 0
				if i+1 < len(data) {
					i++
					n = min(int(data[i]), len(data)-i-1)
				}
				msgs = append(msgs, chunk(string(data[i+1:i+1+n])))
				i += n
			case 2:
				msgs = append(msgs, &connectorv1.ImportFileRequest{})
			case 3:
				msgs = append(msgs, hdr("", connectorv1.IngestMode_INGEST_MODE_IMPORT))
				headers++
			}
		}
		file, err := receiveFile(&fakeStream{msgs: msgs}, limit)
		if err != nil {
			return
		}
		if !firstIsHeader || headers != 1 {
			t.Fatalf("accepted a stream with %d headers, first is header: %v", headers, firstIsHeader)
		}
		if int64(len(file.Content)) > limit {
			t.Fatalf("returned %d bytes over a limit of %d", len(file.Content), limit)
		}
	})
}
