// Package connectortest serves a connector adapter with the SDK's real
// connector server for the adapters' tests, and makes the clients that call
// it as the core does. It is imported only from _test.go files.
package connectortest

import (
	"errors"
	"net"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	openfief "github.com/arkadiuss/openfief/sdk/go"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// CoreToken is the token the test core presents; the server Serve starts
// accepts it and nothing else.
const CoreToken = "core-token"

// Authorization is the Authorization header value that carries CoreToken.
const Authorization = "Bearer " + CoreToken

// tokenVerifier is a CoreVerifier that accepts one token, standing in for
// the SDK's JWKSVerifier, which the SDK's own tests cover.
type tokenVerifier string

func (v tokenVerifier) Verify(token string) error {
	if token != string(v) {
		return errors.New("not the core's token")
	}
	return nil
}

// Serve serves h with openfief.NewConnectorServer on a loopback port until
// the test ends, requiring CoreToken, and returns clients of it by protocol:
// "connect" (Connect over HTTP/1.1) and "grpc" (gRPC over h2c, as the core
// calls it).
func Serve(t testing.TB, h connectorv1connect.ConnectorServiceHandler) map[string]connectorv1connect.ConnectorServiceClient {
	t.Helper()
	srv := openfief.NewConnectorServer("127.0.0.1:0", h, tokenVerifier(CoreToken))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close the connector server: %v", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	base := "http://" + ln.Addr().String()
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	return map[string]connectorv1connect.ConnectorServiceClient{
		"connect": connectorv1connect.NewConnectorServiceClient(http.DefaultClient, base),
		"grpc":    connectorv1connect.NewConnectorServiceClient(&http.Client{Transport: &http.Transport{Protocols: &h2c}}, base, connect.WithGRPC()),
	}
}
