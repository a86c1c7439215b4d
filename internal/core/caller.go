package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"

	"github.com/arkadiuss/openfief/internal/plugins"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// TokenSource gives the bearer token for calling a plugin instance (D-59);
// Tokens is the real one.
type TokenSource interface {
	Token(ctx context.Context, instance string) (string, error)
}

// Resolver returns the base URL a plugin instance serves the core on.
type Resolver func(instance string) string

// ServiceResolver resolves an instance to the Service the operator makes
// for it: http://plugin-<name>.<namespace>.svc:<port>.
func ServiceResolver(namespace string, port int) Resolver {
	return func(instance string) string {
		return "http://" + plugins.ServiceAccountName(instance) + "." + namespace + ".svc:" + strconv.Itoa(port)
	}
}

// Caller calls a plugin's ConnectorService (D-49) with a token for that
// instance alone.
type Caller struct {
	Tokens  TokenSource
	Resolve Resolver
	// HTTP is the client calls go through; nil means a plain client. The
	// SDK serves HTTP/1.1 and h2c; unary calls and ImportFile's client
	// stream both work on HTTP/1.1. Whatever it sets, no redirect is
	// followed and answers are bounded (pluginHTTPClient).
	HTTP *http.Client
	// MaxAnswerBytes and MaxAnswerMemory bound every answer (answer.go);
	// zero means DefaultMaxAnswerBytes and DefaultMaxAnswerMemory.
	MaxAnswerBytes  int
	MaxAnswerMemory int64
	// Metrics, when set, time every call.
	Metrics *Metrics
}

// fileChunk is the size of the chunks ImportFile streams.
const fileChunk = 64 << 10

func (c *Caller) client(ctx context.Context, instance string) (connectorv1connect.ConnectorServiceClient, string, error) {
	h, opts, auth, err := c.conn(ctx, instance)
	if err != nil {
		return nil, "", err
	}
	return connectorv1connect.NewConnectorServiceClient(h, c.Resolve(instance), opts...), auth, nil
}

// conn is what a call to any plugin service of instance needs: the bounded
// HTTP client, the client options bounding its answers and the
// Authorization header with a token for that instance alone.
func (c *Caller) conn(ctx context.Context, instance string) (*http.Client, []connect.ClientOption, string, error) {
	token, err := c.Tokens.Token(ctx, instance)
	if err != nil {
		// Could not mint: the same as an unreachable plugin for the retries.
		return nil, nil, "", connect.NewError(connect.CodeUnavailable, err)
	}
	maxBytes, budget := c.limits()
	return pluginHTTPClient(c.HTTP, int64(maxBytes)+answerSlack), []connect.ClientOption{
		connect.WithReadMaxBytes(maxBytes),
		// Only uncompressed answers: a compressed one's size is known only
		// once inflated, and inflating a bomb to its end costs the core.
		connect.WithAcceptCompression("gzip", nil, nil),
		connect.WithCodec(boundedCodec{budget: budget}),
	}, "Bearer " + token, nil
}

// limits returns the answer bounds, the defaults for those not set.
func (c *Caller) limits() (maxBytes int, budget int64) {
	maxBytes, budget = c.MaxAnswerBytes, c.MaxAnswerMemory
	if maxBytes <= 0 {
		maxBytes = DefaultMaxAnswerBytes
	}
	if budget <= 0 {
		budget = DefaultMaxAnswerMemory
	}
	return maxBytes, budget
}

// Warm gets the instance's token ahead of a call (the scheduler's warmer):
// a token to mint waits for the API server before the sync is due, not
// after. A failure is left to the call, which mints again and reports it.
func (c *Caller) Warm(ctx context.Context, instance string) {
	_, _ = c.Tokens.Token(ctx, instance)
}

// Sync calls the instance's Sync.
func (c *Caller) Sync(ctx context.Context, instance string, req *connectorv1.SyncRequest) (*connectorv1.Delivery, error) {
	defer c.Metrics.observeCall(instance, methodSync, time.Now())
	cl, auth, err := c.client(ctx, instance)
	if err != nil {
		return nil, err
	}
	r := connect.NewRequest(req)
	r.Header().Set("Authorization", auth)
	resp, err := cl.Sync(ctx, r)
	if err != nil {
		return nil, c.refusal("Sync", err)
	}
	if resp.Msg.GetDelivery() == nil {
		return nil, connect.NewError(connect.CodeInternal, errors.New("the connector answered no delivery"))
	}
	return resp.Msg.GetDelivery(), nil
}

// ImportFile streams file to the instance's ImportFile after header.
func (c *Caller) ImportFile(ctx context.Context, instance string, header *connectorv1.FileHeader, file io.Reader) (*connectorv1.Delivery, error) {
	defer c.Metrics.observeCall(instance, methodImportFile, time.Now())
	cl, auth, err := c.client(ctx, instance)
	if err != nil {
		return nil, err
	}
	stream := cl.ImportFile(ctx)
	stream.RequestHeader().Set("Authorization", auth)
	if err := stream.Send(&connectorv1.ImportFileRequest{Message: &connectorv1.ImportFileRequest_Header{Header: header}}); err != nil {
		return nil, c.refusal("ImportFile", closeFor(stream, err))
	}
	buf := make([]byte, fileChunk)
	for {
		n, rerr := file.Read(buf)
		if n > 0 {
			chunk := append([]byte(nil), buf[:n]...)
			if err := stream.Send(&connectorv1.ImportFileRequest{Message: &connectorv1.ImportFileRequest_Chunk{Chunk: chunk}}); err != nil {
				return nil, c.refusal("ImportFile", closeFor(stream, err))
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			_, _ = stream.CloseAndReceive()
			return nil, fmt.Errorf("reading the file: %w", rerr)
		}
	}
	resp, err := stream.CloseAndReceive()
	if err != nil {
		return nil, c.refusal("ImportFile", err)
	}
	if resp.Msg.GetDelivery() == nil {
		return nil, connect.NewError(connect.CodeInternal, errors.New("the connector answered no delivery"))
	}
	return resp.Msg.GetDelivery(), nil
}

// closeFor returns the server's error when a Send failed because the server
// already answered (Send then reports only io.EOF).
func closeFor(stream *connect.ClientStreamForClient[connectorv1.ImportFileRequest, connectorv1.ImportFileResponse], err error) error {
	if errors.Is(err, io.EOF) {
		if _, rerr := stream.CloseAndReceive(); rerr != nil {
			return rerr
		}
	}
	return err
}

// maxPluginErrorText bounds the message of an error a plugin answers, as
// the core records and shows it.
const maxPluginErrorText = 1024

// refusal names what the core refused of a call to method: a redirect, a
// compressed answer, an answer over its bounds (Connect's own limit, the
// capped body, the codec's estimate); a plugin's own error keeps its code
// with its message cut to maxPluginErrorText. Nothing the plugin wrote beyond that message is
// returned: not a redirect's Location, not error details.
func (c *Caller) refusal(method string, err error) error {
	var re redirectError
	if errors.As(err, &re) {
		return re
	}
	if errors.Is(err, ErrCompressedAnswer) {
		return ErrCompressedAnswer
	}
	maxBytes, budget := c.limits()
	switch {
	case errors.Is(err, errOverBudget):
		return fmt.Errorf("%w: its answer to %s would take more than %d bytes of memory to decode; nothing of it is stored", ErrAnswerTooLarge, method, budget)
	case errors.Is(err, errAnswerBytes),
		connect.CodeOf(err) == connect.CodeResourceExhausted && !connect.IsWireError(err):
		return fmt.Errorf("%w: its answer to %s is larger than %d bytes; nothing of it is stored", ErrAnswerTooLarge, method, maxBytes)
	}
	var ce *connect.Error
	if connect.IsWireError(err) && errors.As(err, &ce) {
		return connect.NewError(ce.Code(), errors.New(truncateText(ce.Message(), maxPluginErrorText)))
	}
	return err
}

// truncateText cuts s to at most n bytes on a rune boundary.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
