package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/arkadiuss/openfief/internal/core/store"
	viewv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1/viewv1connect"
)

// ErrGrantChanged is wrapped when a view's data tiers changed during an
// export run (OF-35): the run stops before the next page, and the next run
// starts under the grant as it stands then.
var ErrGrantChanged = errors.New("the view's data tiers changed during the export")

// ViewKinds are the kinds of entry a view holding tiers may be sent
// (OF-11): FX rates, prices and index readings need no tier; transactions
// and balance assertions need TierAccounts.
func ViewKinds(tiers []string) []store.EntryKind {
	kinds := []store.EntryKind{store.KindFxRates, store.KindPrices, store.KindIndexReadings}
	if slices.Contains(tiers, TierAccounts) {
		kinds = append(kinds, store.KindTransactions, store.KindBalanceAssertions)
	}
	return kinds
}

// Export calls the view instance's Export with one page, with a token for
// that instance alone; an answer is bounded as a connector's is.
func (c *Caller) Export(ctx context.Context, instance string, req *viewv1.ExportRequest) error {
	defer c.Metrics.observeCall(instance, methodExport, time.Now())
	h, opts, auth, err := c.conn(ctx, instance)
	if err != nil {
		return err
	}
	r := connect.NewRequest(req)
	r.Header().Set("Authorization", auth)
	if _, err := viewv1connect.NewViewServiceClient(h, c.Resolve(instance), opts...).Export(ctx, r); err != nil {
		return c.refusal("Export", err)
	}
	return nil
}

// ViewStore is what an Exporter needs of the store; *store.Store is it.
type ViewStore interface {
	ReadPage(ctx context.Context, view string, kinds []store.EntryKind, bounds store.PageBounds) (store.Page, error)
	AdvanceView(ctx context.Context, view string, places map[store.EntryKind]int64) error
}

// Exporter sends views the record, a page at a time (OF-35).
type Exporter struct {
	Store  ViewStore
	Caller *Caller
	// CallTimeout bounds one page's call; 0 means DefaultCallTimeout.
	CallTimeout time.Duration
	// Tiers returns a view instance's effective data tiers as its grant
	// stands now; it is asked before every page.
	Tiers func(ctx context.Context, instance string) ([]string, error)
	// Hold, when set, is asked once a page read under tiers is ready to be
	// sent. It fails with ErrGrantChanged when the view's grant no longer
	// holds every one of tiers; otherwise it returns the context to send
	// the page with, derived from ctx and cancelled with the cause
	// ErrGrantChanged as soon as a change that takes one of them away is
	// applied, and release, which Run calls once the call has returned:
	// the change waits for it, so no byte of the page leaves after it is
	// applied. Views sets it (Views.Hold) with Tiers.
	Hold func(ctx context.Context, instance string, tiers []string) (send context.Context, release func(), err error)
	// PageEntries bounds the entries of one page; 0 means
	// DefaultExportPageEntries.
	PageEntries int
	// MaxRequestBytes bounds one page's encoded size; 0 means
	// DefaultMaxExportRequestBytes. The store reads a page within it, less
	// pageRequestOverhead, by the entries' sizes before it reads them
	// (store.PageBounds); an entry's size bounds its encoding, so the
	// encoded page fits. Should it not, the page is read again with half
	// as many entries, so a view never gets a message larger than the SDK
	// reads (MaxViewMessageBytes, twice this).
	MaxRequestBytes int
}

// DefaultMaxExportRequestBytes is the largest page the core sends a view.
const DefaultMaxExportRequestBytes = 8 << 20

// DefaultExportPageEntries is the entries of a page when Exporter does not
// say.
const DefaultExportPageEntries = 1000

// pageRequestOverhead is what a request holds besides its entries (the run
// ID, the tiers, More), kept out of the store's byte bound.
const pageRequestOverhead = 1 << 10

// ExportResult is what one run sent.
type ExportResult struct {
	Pages, Entries int
}

// Run sends view instance the entries after its place, page after page,
// until none is left. Before each page it reads the view's tiers: the
// first page fixes the run's tiers, and a change (narrowed, widened or
// revoked) stops the run with ErrGrantChanged. The view's place moves past
// a page only once Export answered OK, so a failed call leaves it where it
// was and the next run sends the same entries.
func (x *Exporter) Run(ctx context.Context, instance, runID string) (ExportResult, error) {
	var res ExportResult
	limit := x.PageEntries
	if limit <= 0 {
		limit = DefaultExportPageEntries
	}
	maxBytes := x.MaxRequestBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxExportRequestBytes
	}
	var runTiers []string
	for {
		tiers, err := x.Tiers(ctx, instance)
		if err != nil {
			return res, fmt.Errorf("export to %s: the view's grant: %w", instance, err)
		}
		tiers = slices.Sorted(slices.Values(tiers))
		if res.Pages == 0 {
			runTiers = tiers
		} else if !slices.Equal(tiers, runTiers) {
			return res, fmt.Errorf("export to %s: %w (from %v to %v) after %d pages", instance, ErrGrantChanged, runTiers, tiers, res.Pages)
		}
		bounds := store.PageBounds{Entries: limit, Bytes: int64(max(maxBytes-pageRequestOverhead, 1))}
		page, err := x.Store.ReadPage(ctx, instance, ViewKinds(tiers), bounds)
		if err != nil {
			return res, storeError{fmt.Errorf("export to %s: %w", instance, err)}
		}
		if len(page.Entries) == 0 {
			return res, nil
		}
		req := &viewv1.ExportRequest{RunId: runID, DataTiers: tiers, More: page.More}
		for _, e := range page.Entries {
			req.Entries = append(req.Entries, viewEntry(e))
		}
		if size := proto.Size(req); size > maxBytes {
			if len(page.Entries) == 1 {
				return res, fmt.Errorf("export to %s: entry %d alone takes %d bytes, more than a page may (%d)", instance, page.Entries[0].Seq, size, maxBytes)
			}
			limit = len(page.Entries) / 2
			continue
		}
		if err := x.send(ctx, instance, tiers, req); err != nil {
			return res, fmt.Errorf("export to %s: page %d: %w", instance, res.Pages+1, err)
		}
		if err := x.Store.AdvanceView(ctx, instance, page.Places); err != nil {
			return res, storeError{fmt.Errorf("export to %s: %w", instance, err)}
		}
		res.Pages++
		res.Entries += len(page.Entries)
		if !page.More {
			return res, nil
		}
	}
}

// send sends a page read under tiers, held by Hold (when set) so that a
// change taking one of them away, once applied, stops it.
func (x *Exporter) send(ctx context.Context, instance string, tiers []string, req *viewv1.ExportRequest) error {
	if x.Hold == nil {
		return x.call(ctx, instance, req)
	}
	sctx, release, err := x.Hold(ctx, instance, tiers)
	if err != nil {
		return err
	}
	defer release()
	err = x.call(sctx, instance, req)
	if cause := context.Cause(sctx); err != nil && errors.Is(cause, ErrGrantChanged) && ctx.Err() == nil {
		return fmt.Errorf("the page's call was stopped: %w", cause)
	}
	return err
}

// call sends one page within the call timeout.
func (x *Exporter) call(ctx context.Context, instance string, req *viewv1.ExportRequest) error {
	timeout := x.CallTimeout
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return x.Caller.Export(ctx, instance, req)
}

// viewEntry is the contract's form of a stored entry.
func viewEntry(e store.Entry) *viewv1.Entry {
	out := &viewv1.Entry{Sequence: uint64(e.Seq), Source: e.Source, Institution: e.Institution}
	switch {
	case e.FxRate != nil:
		out.Entry = &viewv1.Entry_FxRate{FxRate: e.FxRate}
	case e.Price != nil:
		out.Entry = &viewv1.Entry_Price{Price: e.Price}
	case e.IndexReading != nil:
		out.Entry = &viewv1.Entry_IndexReading{IndexReading: e.IndexReading}
	case e.Transaction != nil:
		out.Entry = &viewv1.Entry_Transaction{Transaction: e.Transaction}
	case e.BalanceAssertion != nil:
		out.Entry = &viewv1.Entry_BalanceAssertion{BalanceAssertion: e.BalanceAssertion}
	}
	return out
}
