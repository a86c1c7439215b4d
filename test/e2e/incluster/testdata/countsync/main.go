// Command countsync is the connector of the core-replicas phase: a stand-in
// that counts the calls in flight. Every Sync takes syncTime, and the
// connector prints one JSON line when it starts and one when it ends: its
// sequence number, the calls in flight at its start (more than one means
// two replicas of the core called it at once), the caller's address (the
// replica's pod IP) and the watermark it was given. It delivers one FX rate
// dated by its sequence number, so the test can tell from the database
// which call's delivery was stored.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	openfief "github.com/arkadiuss/openfief/sdk/go"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// syncTime is how long each Sync takes: long enough for the test to kill
// the calling replica in the middle of one.
const syncTime = 3 * time.Second

// day0 is the date of sequence number 0's rate.
var day0 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Line is one line the connector prints (the test mirrors it as callLine).
type Line struct {
	Event     string `json:"event"` // start, end
	Seq       int    `json:"seq"`
	InFlight  int    `json:"inFlight,omitempty"` // at the start, this call included
	Peer      string `json:"peer"`
	Watermark string `json:"watermark,omitempty"`
	At        string `json:"at"` // RFC 3339 with nanoseconds
	Result    string `json:"result,omitempty"`
}

type counter struct {
	connectorv1connect.UnimplementedConnectorServiceHandler
	mu       sync.Mutex
	seq      int
	inFlight int
	out      *json.Encoder
}

func (c *counter) print(l Line) {
	l.At = time.Now().UTC().Format(time.RFC3339Nano)
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.out.Encode(l)
}

func (c *counter) Sync(ctx context.Context, req *connect.Request[connectorv1.SyncRequest]) (*connect.Response[connectorv1.SyncResponse], error) {
	c.mu.Lock()
	c.seq++
	c.inFlight++
	seq, n := c.seq, c.inFlight
	c.mu.Unlock()
	peer := req.Peer().Addr
	c.print(Line{Event: "start", Seq: seq, InFlight: n, Peer: peer, Watermark: req.Msg.GetWatermark()})
	var err error
	select {
	case <-time.After(syncTime):
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.mu.Lock()
	c.inFlight--
	c.mu.Unlock()
	if err != nil {
		c.print(Line{Event: "end", Seq: seq, Peer: peer, Result: err.Error()})
		return nil, connect.NewError(connect.CodeCanceled, errors.New("the call was cancelled"))
	}
	c.print(Line{Event: "end", Seq: seq, Peer: peer, Result: "ok"})
	k, _ := strconv.Atoi(req.Msg.GetWatermark())
	return connect.NewResponse(&connectorv1.SyncResponse{Delivery: &connectorv1.Delivery{
		BatchId:     req.Msg.GetBatchId(),
		Institution: &connectorv1.Institution{Id: "countsync", Name: "Counting stand-in"},
		FxRates: []*connectorv1.FxRate{{
			Date: day0.AddDate(0, 0, seq).Format(time.DateOnly), BaseCurrency: "EUR", QuoteCurrency: "PLN", Rate: "4.2840",
		}},
		Watermark: strconv.Itoa(k + 1),
	}}), nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := openfief.ServeConnector(ctx, &counter{out: json.NewEncoder(os.Stdout)}); err != nil {
		fmt.Fprintln(os.Stderr, "countsync:", err)
		os.Exit(1)
	}
}
