package core

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// Hostile plugins: servers on loopback that answer the core's calls with
// what a connector controls, the way Connect frames it.

// junkAnswer answers every unary call 200 with size bytes of junk as an
// uncompressed protobuf body, written in chunks without a Content-Length
// (so the core cannot tell its size before reading). It counts the bytes
// it managed to send.
func junkAnswer(size int64, sent *atomic.Int64) http.Handler {
	chunk := bytes.Repeat([]byte{0x0a}, 64<<10)
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/proto")
		w.WriteHeader(http.StatusOK)
		for left := size; left > 0; {
			n := min(left, int64(len(chunk)))
			if _, err := w.Write(chunk[:n]); err != nil {
				return // the core hung up
			}
			if sent != nil {
				sent.Add(n)
			}
			left -= n
		}
	})
}

// gzipBomb answers every unary call with a gzip body that inflates to size
// bytes.
func gzipBomb(t testing.TB, size int) http.Handler {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zero := make([]byte, 1<<20)
	for left := size; left > 0; left -= len(zero) {
		_, _ = zw.Write(zero[:min(left, len(zero))])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	body := buf.Bytes()
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/proto")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(body)
	})
}

// emptyTransactions is the encoding of a SyncResponse (or an
// ImportFileResponse: the same field) whose delivery holds n empty
// transactions: two bytes each on the wire, a whole struct each decoded.
func emptyTransactions(batch string, n int) []byte {
	var d []byte
	d = protowire.AppendTag(d, 1, protowire.BytesType)
	d = protowire.AppendString(d, batch)
	for range n {
		d = protowire.AppendTag(d, 3, protowire.BytesType)
		d = protowire.AppendVarint(d, 0)
	}
	var resp []byte
	resp = protowire.AppendTag(resp, 1, protowire.BytesType)
	return protowire.AppendBytes(resp, d)
}

// ordinaryAnswer is the encoding of a SyncResponse whose delivery holds as
// many ordinary transactions (two postings, a description) as fit in size
// bytes.
func ordinaryAnswer(batch string, size int) []byte {
	tx := func(i int) *connectorv1.Transaction {
		return &connectorv1.Transaction{
			SourceId: fmt.Sprintf("tx-%08d", i), Date: "2026-11-02", Description: "CARD PAYMENT COFFEE SHOP WARSZAWA",
			Postings: []*connectorv1.Posting{
				{AccountId: "checking", Amount: "-13.50", Currency: "PLN"},
				{AccountId: "expenses:food", Amount: "13.50", Currency: "PLN"},
			},
		}
	}
	d := &connectorv1.Delivery{BatchId: batch, Institution: &connectorv1.Institution{Id: "bank", Name: "Bank"}}
	for i := range (size - 1024) / (proto.Size(tx(0)) + 3) {
		d.Transactions = append(d.Transactions, tx(i))
	}
	raw, _ := proto.Marshal(&connectorv1.SyncResponse{Delivery: d})
	return raw
}

// fixedAnswer answers every unary call 200 with body.
func fixedAnswer(body []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/proto")
		_, _ = w.Write(body)
	})
}

// hugeEnvelope answers a streaming call (ImportFile) with an envelope that
// announces size bytes and then sends junk until the core hangs up.
func hugeEnvelope(size uint32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/connect+proto")
		w.WriteHeader(http.StatusOK)
		prefix := make([]byte, 5)
		binary.BigEndian.PutUint32(prefix[1:], size)
		if _, err := w.Write(prefix); err != nil {
			return
		}
		chunk := make([]byte, 64<<10)
		for sent := int64(0); sent < int64(size); sent += int64(len(chunk)) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
}

// serveHostile serves h on loopback for the test.
func serveHostile(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
