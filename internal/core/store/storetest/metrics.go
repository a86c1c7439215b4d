package storetest

import (
	"context"
	"testing"

	"github.com/arkadiuss/openfief/internal/core/store"
)

// metricsCases are the suite's cases of what the core's metrics read of the
// store: a view's lag and the record's size.
var metricsCases = []struct {
	name string
	run  func(*testing.T, Backend)
}{
	{"ViewLagCountsWhatIsNotKept", testViewLagNotKept},
	{"SizeGrowsWithTheRecord", testSize},
}

// testViewLag: a view's lag is the entries of its kinds after its places,
// every entry before its first page, fewer as pages are kept, none once it
// has them all, and the new ones after an import; kinds it may not be sent
// do not count.
func testViewLagNotKept(t *testing.T, b Backend) {
	ctx := context.Background()
	s := open(t, b.NewDSN(t))
	lag := func(kinds []store.EntryKind) int64 {
		t.Helper()
		n, err := s.ViewLag(ctx, "csv", kinds)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := lag(allKinds); n != 0 {
		t.Fatalf("lag of an empty record: %d", n)
	}
	mustImport(t, s, "ibkr", store.KindSync, Sync("b0", 0, 25, "w0"))
	days := int64(Days(0, 25))
	if got, want := lag(allKinds), 25+4*days; got != want {
		t.Errorf("lag before the first page: %d, want %d", got, want)
	}
	if got, want := lag(publicKinds), 3*days; got != want {
		t.Errorf("lag of the public kinds: %d, want %d", got, want)
	}
	page, err := s.ReadPage(ctx, "csv", allKinds, store.PageBounds{Entries: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AdvanceView(ctx, "csv", page.Places); err != nil {
		t.Fatal(err)
	}
	if got, want := lag(allKinds), 25+4*days-10; got != want {
		t.Errorf("lag after a page of 10: %d, want %d", got, want)
	}
	drain(t, s, "csv", allKinds, 100)
	if n := lag(allKinds); n != 0 {
		t.Errorf("lag after every page: %d", n)
	}
	mustImport(t, s, "ibkr", store.KindSync, Sync("b1", 25, 5, "w1"))
	if got, want := lag(allKinds), 5+4*int64(Days(0, 30)-Days(0, 25)); got != want {
		t.Errorf("lag after a new import: %d, want %d", got, want)
	}
	if n, err := s.ViewLag(ctx, "other", nil); err != nil || n != 0 {
		t.Errorf("lag of no kinds: %d, %v", n, err)
	}
}

// testSize: the record's size is positive from the start and grows with
// what is imported.
func testSize(t *testing.T, b Backend) {
	ctx := context.Background()
	s := open(t, b.NewDSN(t))
	before, err := s.Size(ctx)
	if err != nil || before <= 0 {
		t.Fatalf("size of an empty record: %d, %v", before, err)
	}
	for i := range 20 {
		mustImport(t, s, "ibkr", store.KindSync, Sync("b"+string(rune('a'+i)), i*50, 50, "w"))
	}
	after, err := s.Size(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Errorf("size %d after 1,000 transactions, %d before", after, before)
	}
}
