// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1/viewv1connect"
)

// MaxMessageBytes bounds one message the connector server reads, such as one
// ImportFile chunk. ReceiveFile's limit bounds the whole file.
const MaxMessageBytes = 4 << 20

// NewConnectorServer returns the HTTP server a connector serves the core
// with: the generated ConnectorService handler for handler, behind
// RequireCore with verifier, speaking HTTP/1.1 and HTTP/2 without TLS
// (h2c), since ImportFile streams. It serves Connect, gRPC and gRPC-Web. A
// nil verifier refuses every call. opts are passed to the generated handler.
func NewConnectorServer(addr string, handler connectorv1connect.ConnectorServiceHandler, verifier CoreVerifier, opts ...connect.HandlerOption) *http.Server {
	opts = append([]connect.HandlerOption{connect.WithReadMaxBytes(MaxMessageBytes)}, opts...)
	return newPluginServer(addr, verifier, func(mux *http.ServeMux) {
		mux.Handle(connectorv1connect.NewConnectorServiceHandler(handler, opts...))
	})
}

// MaxViewMessageBytes bounds one page the view server reads: the core's
// pages hold a bounded number of entries, each bounded by the store's
// validation.
const MaxViewMessageBytes = 16 << 20

// NewViewServer returns the HTTP server a view serves the core with: the
// generated ViewService handler for handler behind RequireCore with
// verifier, as NewConnectorServer does for a connector. A nil verifier
// refuses every call. opts are passed to the generated handler.
func NewViewServer(addr string, handler viewv1connect.ViewServiceHandler, verifier CoreVerifier, opts ...connect.HandlerOption) *http.Server {
	opts = append([]connect.HandlerOption{connect.WithReadMaxBytes(MaxViewMessageBytes)}, opts...)
	return newPluginServer(addr, verifier, func(mux *http.ServeMux) {
		mux.Handle(viewv1connect.NewViewServiceHandler(handler, opts...))
	})
}

// newPluginServer is the server both kinds of plugin serve the core with:
// the handlers register routes, all behind RequireCore, over HTTP/1.1 and
// h2c.
func newPluginServer(addr string, verifier CoreVerifier, register func(*http.ServeMux)) *http.Server {
	mux := http.NewServeMux()
	register(mux)
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Addr:              addr,
		Handler:           RequireCore(verifier, mux),
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
}

// RequireCore lets through only requests whose "Authorization: Bearer"
// token verifier accepts, the core's token for this instance; every
// other request gets 401 before next sees it. The response never says why,
// and nothing is logged. A nil verifier refuses every request.
func RequireCore(verifier CoreVerifier, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r.Header)
		if !ok || verifier == nil || verifier.Verify(token) != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="openfief-plugin"`)
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearerToken returns the token of the request's single Authorization
// header when it uses the Bearer scheme.
func bearerToken(h http.Header) (string, bool) {
	values := h.Values("Authorization")
	if len(values) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// File is a statement file received over ImportFile: its header and all of
// its bytes.
type File struct {
	// Header is the FileHeader the stream opened with.
	Header *connectorv1.FileHeader
	// Content is the file's bytes, every chunk in order.
	Content []byte
}

// ErrFileTooLarge is wrapped by ReceiveFile's error when a file exceeds the
// connector's limit; that error carries connect.CodeResourceExhausted.
var ErrFileTooLarge = errors.New("file exceeds the connector's size limit")

// ReceiveFile reads a whole ImportFile stream: exactly one FileHeader
// first, with a batch ID and a known ingest mode, then chunks of at most
// limit bytes in all. A missing, repeated or late header is a
// connect.CodeInvalidArgument error, a larger file is
// connect.CodeResourceExhausted, so a connector can return the error as it
// is.
func ReceiveFile(stream *connect.ClientStream[connectorv1.ImportFileRequest], limit int64) (*File, error) {
	return receiveFile(stream, limit)
}

// fileStream is the part of connect.ClientStream that receiveFile reads.
type fileStream interface {
	Receive() bool
	Msg() *connectorv1.ImportFileRequest
	Err() error
}

func receiveFile(stream fileStream, limit int64) (*File, error) {
	if limit <= 0 {
		return nil, connect.NewError(connect.CodeInternal, errors.New("ReceiveFile: the size limit must be positive"))
	}
	var f File
	for stream.Receive() {
		switch m := stream.Msg().GetMessage().(type) {
		case *connectorv1.ImportFileRequest_Header:
			if f.Header != nil {
				return nil, invalidArgument("a second file header")
			}
			if err := checkFileHeader(m.Header); err != nil {
				return nil, err
			}
			f.Header = m.Header
		case *connectorv1.ImportFileRequest_Chunk:
			if f.Header == nil {
				return nil, invalidArgument("a chunk before the file header")
			}
			if int64(len(m.Chunk)) > limit-int64(len(f.Content)) {
				return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%w of %d bytes", ErrFileTooLarge, limit))
			}
			f.Content = append(f.Content, m.Chunk...)
		default:
			return nil, invalidArgument("a message with neither header nor chunk")
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	if f.Header == nil {
		return nil, invalidArgument("no file header")
	}
	if f.Content == nil {
		f.Content = []byte{}
	}
	return &f, nil
}

func checkFileHeader(h *connectorv1.FileHeader) error {
	if h == nil {
		return invalidArgument("an empty file header")
	}
	if h.GetBatchId() == "" {
		return invalidArgument("file header: no batch_id")
	}
	if _, ok := connectorv1.IngestMode_name[int32(h.GetMode())]; !ok {
		return invalidArgument(fmt.Sprintf("file header: unknown ingest mode %d", h.GetMode()))
	}
	return nil
}

func invalidArgument(msg string) error {
	return connect.NewError(connect.CodeInvalidArgument, errors.New("ImportFile stream: "+msg))
}
