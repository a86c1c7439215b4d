package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/arkadiuss/openfief/internal/core/store"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// LargeTransaction is a valid Sync delivery of batch holding one
// transaction, sourceID, with postings postings, each carrying an account
// ID and a memo of text bytes together (the largest a connector may deliver
// is 1,000 postings of two strings near MaxText: about 7 MB). The text is
// multi-byte UTF-8, so a size counted in characters would be short.
func LargeTransaction(batch, sourceID string, postings, text int) *connectorv1.Delivery {
	const unit = "zażółć " // 11 bytes
	long := strings.Repeat(unit, max(text/2/len(unit), 1))
	tx := &connectorv1.Transaction{SourceId: sourceID, Date: "2026-02-01", Description: "a very long transfer", Payee: long}
	for i := range postings {
		amount := "1.00"
		if i%2 == 1 {
			amount = "-1.00"
		}
		tx.Postings = append(tx.Postings, &connectorv1.Posting{
			AccountId: fmt.Sprintf("acct-%d-%s", i, long), Amount: amount, Currency: "PLN", Memo: long,
		})
	}
	return &connectorv1.Delivery{
		BatchId:      batch,
		Institution:  &connectorv1.Institution{Id: "bigbank", Name: "Big " + long[:len(long)/4]},
		Transactions: []*connectorv1.Transaction{tx},
	}
}

// testExportPageBytes: a page is bounded in bytes before it is read. The
// store reads only the entries that fit the page's bytes (by their sizes,
// computed by the database before it reads them), never more than it
// returns, and the sizes it planned with are what the entries it read
// hold. An entry larger than the page on its own is a page of its own.
// Every entry still leaves once, in order, as delivered.
func testExportPageBytes(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	ctx := context.Background()
	mustImport(t, s, "bank", store.KindSync, Sync("b0", 0, 25, "w0"))
	var delivered []*connectorv1.Transaction
	for i := range 10 {
		d := LargeTransaction(fmt.Sprintf("big-%d", i), fmt.Sprintf("big-%02d", i), 40, 4000) // about 170 KB each
		if i == 6 {
			d = LargeTransaction("huge", "huge", 400, 4000) // about 1.7 MB: above the page
		}
		mustImport(t, s, "bank", store.KindSync, d)
		delivered = append(delivered, d.GetTransactions()...)
		mustImport(t, s, "fx", store.KindSync, Sync(fmt.Sprintf("s%d", i), 100+10*i, 3, ""))
	}
	const budget = 512 << 10
	var got []store.Entry
	pages, alone := 0, 0
	for p := (store.Page{More: true}); p.More; pages++ {
		if pages > 1000 {
			t.Fatal("the pages never end")
		}
		before := b.Loaded(s)
		var err error
		p, err = s.ReadPage(ctx, "csv", allKinds, store.PageBounds{Entries: 1000, Bytes: budget})
		if err != nil {
			t.Fatal(err)
		}
		loaded := b.Loaded(s) - before
		var sum int64
		for _, e := range p.Entries {
			sum += e.Size
		}
		if len(p.Entries) > 1 && p.Bytes > budget {
			t.Fatalf("page %d: %d entries of %d bytes, above the page's %d", pages, len(p.Entries), p.Bytes, budget)
		}
		if len(p.Entries) == 1 && p.Bytes > budget {
			alone++
		}
		if loaded != p.Bytes || sum != p.Bytes {
			t.Fatalf("page %d: planned %d bytes, read %d, its entries hold %d: the store read what it did not plan", pages, p.Bytes, loaded, sum)
		}
		got = append(got, p.Entries...)
		if err := s.AdvanceView(ctx, "csv", p.Places); err != nil {
			t.Fatal(err)
		}
	}
	if alone != 1 {
		t.Errorf("%d pages of one entry above the page's bytes, want 1 (the huge transaction)", alone)
	}
	var sent []*connectorv1.Transaction
	last := int64(0)
	for _, e := range got {
		if e.Seq <= last {
			t.Fatalf("entry %d after %d", e.Seq, last)
		}
		last = e.Seq
		if id := e.Transaction.GetSourceId(); e.Source == "bank" && (strings.HasPrefix(id, "big-") || id == "huge") {
			sent = append(sent, e.Transaction)
		}
	}
	if diff := cmp.Diff(delivered, sent, protocmp.Transform()); diff != "" {
		t.Errorf("large transactions sent differ from those delivered (-delivered +sent):\n%s", diff)
	}
	small := 25 + 4*Days(0, 25) + 10*(3+4)
	if len(got) != small+10 {
		t.Errorf("%d entries sent, want %d", len(got), small+10)
	}
	// About 3.4 MB in pages of 512 KiB: a page is filled, not cut short.
	if pages > 12 {
		t.Errorf("%d pages for about 3.4 MB in pages of 512 KiB", pages)
	}
}
