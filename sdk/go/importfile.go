// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"errors"
	"fmt"

	"connectrpc.com/connect"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

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
