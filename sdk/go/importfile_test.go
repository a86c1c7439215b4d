// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"errors"
	"testing"

	"connectrpc.com/connect"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

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
