// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"github.com/go-jose/go-jose/v4/jwt"
	"google.golang.org/protobuf/proto"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	viewv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1/viewv1connect"
)

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
