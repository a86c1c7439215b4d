package main

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"

	openfief "github.com/arkadiuss/openfief/sdk/go"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	viewv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1/viewv1connect"
)

// testToken stands in for the core's token: the test's verifier accepts it
// alone, where the real one checks the core's signed token.
type testToken string

func (t testToken) Verify(token string) error {
	if token != string(t) {
		return errors.New("not the test token")
	}
	return nil
}

// TestExportTwice sends one page twice through the SDK's server, as the
// core does after a cut call: the second time nothing is kept again.
func TestExportTwice(t *testing.T) {
	var out bytes.Buffer
	srv := httptest.NewServer(openfief.NewViewServer("", newView(Config{}, &out), testToken("core")).Handler)
	defer srv.Close()
	client := viewv1connect.NewViewServiceClient(srv.Client(), srv.URL)

	page := &viewv1.ExportRequest{RunId: "run-1", Entries: []*viewv1.Entry{{
		Sequence:    1,
		Source:      "example-connector",
		Institution: &connectorv1.Institution{Id: "example-bank", Name: "Example Bank"},
		Entry: &viewv1.Entry_FxRate{FxRate: &connectorv1.FxRate{
			Date: "2026-01-02", BaseCurrency: "EUR", QuoteCurrency: "USD", Rate: "1.0350",
		}},
	}}}
	for range 2 {
		req := connect.NewRequest(page)
		req.Header().Set("Authorization", "Bearer core")
		if _, err := client.Export(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	want := "export: kept 1 entries, skipped 0 already kept\nexport: kept 0 entries, skipped 1 already kept\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}

	// A call without the core's token never reaches the view.
	_, err := client.Export(context.Background(), connect.NewRequest(page))
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("a call without a token: %v, want Unauthenticated", err)
	}
	if strings.Count(out.String(), "\n") != 2 {
		t.Errorf("the refused call reached the view: %s", out.String())
	}
}
