package storetest

import (
	"context"
	"testing"

	"github.com/arkadiuss/openfief/internal/core/store"
)

// testViewLag: a view's lag is the number of entries of its kinds it has
// not been sent: all of them at first, none once drained, the new ones
// after another import, and only the kinds asked for.
func testViewLag(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	ctx := context.Background()
	lag := func(kinds []store.EntryKind) int64 {
		t.Helper()
		n, err := s.ViewLag(ctx, "csv", kinds)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := lag(allKinds); got != 0 {
		t.Errorf("lag of an empty record = %d, want 0", got)
	}
	mustImport(t, s, "fx-a", store.KindSync, Sync("b0", 0, 25, "w0"))
	rates := []store.EntryKind{store.KindFxRates}
	before, ratesBefore := lag(allKinds), lag(rates)
	sent := drain(t, s, "csv", allKinds, 10)
	if before != int64(len(sent)) {
		t.Errorf("lag before the export = %d, want the %d entries the export sent", before, len(sent))
	}
	if want := int64(byKind(sent)[store.KindFxRates]); ratesBefore != want {
		t.Errorf("lag of FX rates alone = %d, want %d", ratesBefore, want)
	}
	if got := lag(allKinds); got != 0 {
		t.Errorf("lag after the export = %d, want 0", got)
	}
	mustImport(t, s, "fx-a", store.KindSync, Sync("b1", 25, 5, "w1"))
	next := lag(allKinds)
	if more := drain(t, s, "csv", allKinds, 10); next != int64(len(more)) || next == 0 {
		t.Errorf("lag after a second import = %d, want the %d new entries", next, len(more))
	}
	if got, err := s.ViewLag(ctx, "nextcloud", allKinds); err != nil || got == 0 {
		t.Errorf("lag of a view never sent anything = %d, %v; want every entry", got, err)
	}
}
