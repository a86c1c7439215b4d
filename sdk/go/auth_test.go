// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

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
