package main

import (
	"context"
	"fmt"
	"io"
	"sync"

	"connectrpc.com/connect"

	viewv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1/viewv1connect"
)

// Config is the instance's config, as manifest.json's configSchema
// describes it (none yet). LoadConfig refuses a field this struct does not
// have.
type Config struct{}

// view keeps the pages of entries the core exports to it. The core moves
// the view's place only once Export answered OK, so a page can come again
// (after a restart, or a call cut by a timeout): the view keeps, for each
// kind of entry, the largest sequence it kept, and skips what it already
// has. This one writes a line per page to out; a real view writes the
// entries where the owner reads them (through the egress proxy, with
// openfief.NewEgressClient) and keeps its place there, not in memory.
type view struct {
	viewv1connect.UnimplementedViewServiceHandler
	out io.Writer

	mu   sync.Mutex
	kept map[string]uint64 // kind of entry -> largest sequence kept
}

func newView(_ Config, out io.Writer) *view {
	return &view{out: out, kept: map[string]uint64{}}
}

// Export keeps one page.
func (v *view) Export(_ context.Context, req *connect.Request[viewv1.ExportRequest]) (*connect.Response[viewv1.ExportResponse], error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var kept, skipped int
	for _, e := range req.Msg.GetEntries() {
		kind := entryKind(e)
		if e.GetSequence() <= v.kept[kind] {
			skipped++
			continue
		}
		v.kept[kind] = e.GetSequence()
		kept++
	}
	fmt.Fprintf(v.out, "export: kept %d entries, skipped %d already kept\n", kept, skipped)
	return connect.NewResponse(&viewv1.ExportResponse{}), nil
}

// entryKind names the kind of an entry; the core numbers each kind apart.
func entryKind(e *viewv1.Entry) string {
	switch e.GetEntry().(type) {
	case *viewv1.Entry_FxRate:
		return "fx-rates"
	case *viewv1.Entry_Price:
		return "prices"
	case *viewv1.Entry_IndexReading:
		return "index-readings"
	case *viewv1.Entry_Transaction:
		return "transactions"
	case *viewv1.Entry_BalanceAssertion:
		return "balances"
	}
	return "unknown"
}
