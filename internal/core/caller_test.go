//go:build cluster

package core

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/arkadiuss/openfief/internal/plugins"
	openfief "github.com/arkadiuss/openfief/sdk/go"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// servePlugin serves a connector for instance on loopback behind the SDK's
// RequireCore with the real JWKSVerifier (D-59), and returns its base URL.
func servePlugin(t *testing.T, dir, instance string, h connectorv1connect.ConnectorServiceHandler) string {
	t.Helper()
	v, err := openfief.NewJWKSVerifier(dir, instance, plugins.DefaultCoreSubject)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := openfief.NewConnectorServer(ln.Addr().String(), h, v)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// TestCallerMeetsRequireCore: the core's TokenRequest tokens carry exactly
// what the SDK checks (subject, per-instance audience, issuer, signature),
// for Sync and a streamed ImportFile; a token for another instance is
// refused by the plugin before its handler.
func TestCallerMeetsRequireCore(t *testing.T) {
	cs, _ := cluster(t)
	dir := jwksDir(t, cs)
	url := servePlugin(t, dir, "fx", echoConnector{})
	tokens := NewTokens(cs.CoreV1(), plugins.Namespace, DefaultServiceAccount, nil)
	c := &Caller{Tokens: tokens, Resolve: func(string) string { return url }}
	ctx := t.Context()

	d, err := c.Sync(ctx, "fx", &connectorv1.SyncRequest{BatchId: "b1"})
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if d.GetBatchId() != "b1" || len(d.GetFxRates()) != 2 {
		t.Fatalf("delivery %v", d)
	}

	file := bytes.Repeat([]byte("2026-11-27;USD;3.6589\n"), 20_000) // ~440 kB: several chunks
	sum := sha256.Sum256(file)
	d, err = c.ImportFile(ctx, "fx", &connectorv1.FileHeader{BatchId: "b2", FileName: "rates.csv"}, bytes.NewReader(file))
	if err != nil {
		t.Fatalf("ImportFile: %v", err)
	}
	if want := "rates.csv " + hex.EncodeToString(sum[:]); len(d.GetProblems()) != 1 || d.GetProblems()[0].GetMessage() != want {
		t.Fatalf("ImportFile delivery %v, want the file's hash", d)
	}

	// The plugin "fx" answers at this URL, but a token minted for "ibkr"
	// is not for it.
	_, err = c.Sync(ctx, "ibkr", &connectorv1.SyncRequest{BatchId: "b3"})
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("Sync with ibkr's token at fx: %v, want Unauthenticated", err)
	}

	// The token is minted once and reused.
	first, _ := tokens.Token(ctx, "fx")
	second, _ := tokens.Token(ctx, "fx")
	if first != second {
		t.Error("a second token minted within its lifetime")
	}

	// An unreachable plugin is Unavailable (retried by the scheduler).
	down := &Caller{Tokens: tokens, Resolve: func(string) string { return "http://127.0.0.1:1" }}
	_, err = down.Sync(ctx, "fx", &connectorv1.SyncRequest{BatchId: "b4"})
	if connect.CodeOf(err) != connect.CodeUnavailable || !retryable(err) {
		t.Fatalf("unreachable plugin: %v, want Unavailable", err)
	}
	// A token the core cannot mint is Unavailable too, and names no token.
	nosa := NewTokens(cs.CoreV1(), plugins.Namespace, "no-such-sa", nil)
	_, err = (&Caller{Tokens: nosa, Resolve: c.Resolve}).Sync(ctx, "fx", &connectorv1.SyncRequest{BatchId: "b5"})
	if !retryable(err) || errors.Is(err, context.Canceled) || strings.Contains(err.Error(), first) {
		t.Fatalf("without a ServiceAccount: %v", err)
	}
}
