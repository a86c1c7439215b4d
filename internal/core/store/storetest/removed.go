package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/arkadiuss/openfief/internal/core/store"
)

// removedCases are the suite's cases of uninstalled instances (OF-38).
var removedCases = []struct {
	name string
	run  func(*testing.T, Backend)
}{
	{"UninstallKeepsAndMarks", testUninstallKeeps},
	{"ReinstallStartsFresh", testReinstallFresh},
	{"ClaimAfterMissedRemoval", testClaimReplaces},
	{"MarkRemovedOnlyTheUIDSeen", testMarkStale},
	{"PurgeDeletesExactlyOne", testPurgeExact},
	{"PurgeRefusesLive", testPurgeLive},
	{"RemovedArgumentsValidated", testRemovedValidation},
	{"MigrationAdoptsOldRows", testMigrationAdopts},
	{"ViewsKeepRemovedEntries", testViewsKeepRemoved},
}

// Two UIDs as the API server hands them out.
const (
	uid1 = "0a1b2c3d-1111-4a4a-8b8b-000000000001"
	uid2 = "9f8e7d6c-2222-4a4a-8b8b-000000000002"
	uid3 = "5e5e5e5e-3333-4a4a-8b8b-000000000003"
)

var removedAt = time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)

func mustClaim(t *testing.T, s *store.Store, name, uid string) string {
	t.Helper()
	key, err := s.Claim(context.Background(), name, uid, removedAt)
	if err != nil {
		t.Fatalf("Claim(%s, %s): %v", name, uid, err)
	}
	return key
}

func mustMark(t *testing.T, s *store.Store, name, uid string, at time.Time) string {
	t.Helper()
	key, err := s.MarkRemoved(context.Background(), name, uid, at)
	if err != nil {
		t.Fatalf("MarkRemoved(%s, %s): %v", name, uid, err)
	}
	return key
}

func mustCount(t *testing.T, s *store.Store, key string) store.PurgeCounts {
	t.Helper()
	c, err := s.Count(context.Background(), key)
	if err != nil {
		t.Fatalf("Count(%s): %v", key, err)
	}
	return c
}

// counted is what Count should find after results rs (and places view
// places).
func counted(places int, rs ...store.ImportResult) store.PurgeCounts {
	return store.PurgeCounts{Rows: rows(rs...), ViewPlaces: places}
}

func checkCount(t *testing.T, s *store.Store, key string, want store.PurgeCounts) {
	t.Helper()
	if diff := cmp.Diff(want, mustCount(t, s, key)); diff != "" {
		t.Errorf("Count(%s) (-want +got):\n%s", key, diff)
	}
}

// onePlace moves view's place for fx rates to 1.
func onePlace(t *testing.T, s *store.Store, view string) {
	t.Helper()
	if err := s.AdvanceView(context.Background(), view, map[store.EntryKind]int64{store.KindFxRates: 1}); err != nil {
		t.Fatal(err)
	}
}

func checkUnknown(t *testing.T, s *store.Store, key string) {
	t.Helper()
	if st, err := s.Status(context.Background(), key); !errors.Is(err, store.ErrUnknownInstance) {
		t.Errorf("Status(%s) = %+v, %v; want ErrUnknownInstance", key, st, err)
	}
}

func testUninstallKeeps(t *testing.T, b Backend) {
	ctx := context.Background()
	s := open(t, b.NewDSN(t))
	mustClaim(t, s, "bank", uid1)
	r1 := mustImport(t, s, "bank", store.KindSync, Sync("b1", 0, 20, "w1"))
	r2 := mustImport(t, s, "bank", store.KindFile, Sync("f1", 20, 5, ""))
	mustClaim(t, s, "other", uid3)
	other := mustImport(t, s, "other", store.KindSync, Sync("b1", 0, 5, "wo"))

	key := mustMark(t, s, "bank", uid1, removedAt)
	if key != "bank~0a1b2c3d" {
		t.Errorf("removed key %q, want bank~0a1b2c3d (the name and the UID's first 8 hex digits)", key)
	}
	// Every row is kept under the removed key; none is left under the name.
	checkCount(t, s, key, counted(0, r1, r2))
	checkCount(t, s, "bank", store.PurgeCounts{})
	checkCount(t, s, "other", counted(0, other))
	checkUnknown(t, s, "bank")
	checkWatermark(t, s, "bank", "")
	st, err := s.Status(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !st.RemovedAt.Equal(removedAt) || st.UID != uid1 || st.Watermark != "w1" || st.Rows != rows(r1, r2) {
		t.Errorf("Status(%s) = %+v; want removed at %v, UID %s, watermark w1, rows %+v", key, st, removedAt, uid1, rows(r1, r2))
	}
	// Readable by the owner under its key.
	if tx, err := s.Transaction(ctx, key, SourceID(3)); err != nil || len(tx.GetPostings()) != 2 {
		t.Errorf("Transaction(%s, %s) = %v, %v", key, SourceID(3), tx, err)
	}
	removed, err := s.RemovedInstances(ctx)
	want := []store.RemovedInstance{{Key: key, Name: "bank", UID: uid1, RemovedAt: removedAt}}
	if err != nil || !cmp.Equal(want, removed) {
		t.Errorf("RemovedInstances = %+v, %v; want %+v", removed, err, want)
	}
	names, err := s.Instances(ctx)
	if err != nil || !cmp.Equal(names, []string{"other"}) {
		t.Errorf("Instances = %v, %v; want [other]", names, err)
	}
	live, err := s.LiveInstances(ctx)
	if err != nil || !cmp.Equal(live, []store.LiveInstance{{Name: "other", UID: uid3}}) {
		t.Errorf("LiveInstances = %+v, %v", live, err)
	}
	// Marking again finds nothing live: nothing changes.
	if again := mustMark(t, s, "bank", uid1, removedAt.Add(time.Hour)); again != "" {
		t.Errorf("second MarkRemoved moved rows to %q", again)
	}
	checkCount(t, s, key, counted(0, r1, r2))
}

func testReinstallFresh(t *testing.T, b Backend) {
	ctx := context.Background()
	s := open(t, b.NewDSN(t))
	mustClaim(t, s, "bank", uid1)
	old := mustImport(t, s, "bank", store.KindSync, Sync("b1", 0, 20, "w1"))
	mustClaim(t, s, "ledger", uid1) // a view: its places alone
	onePlace(t, s, "ledger")
	oldKey := mustMark(t, s, "bank", uid1, removedAt)
	oldView := mustMark(t, s, "ledger", uid1, removedAt)

	// A new Plugin of the same name: no watermark, no rows, no view place.
	if key := mustClaim(t, s, "bank", uid2); key != "" {
		t.Errorf("Claim of a fresh name moved rows to %q", key)
	}
	checkWatermark(t, s, "bank", "")
	checkCount(t, s, "bank", store.PurgeCounts{})
	mustClaim(t, s, "ledger", uid2)
	if places, err := s.ViewPlaces(ctx, "ledger"); err != nil || len(places) != 0 {
		t.Errorf("ViewPlaces of the new view = %v, %v; want none (the start)", places, err)
	}
	checkCount(t, s, oldView, store.PurgeCounts{ViewPlaces: 1})

	// The same source IDs, even the same batch ID, are stored again.
	again := mustImport(t, s, "bank", store.KindSync, Sync("b1", 0, 20, "w2"))
	if diff := cmp.Diff(want(0, 20), again); diff != "" {
		t.Errorf("the old delivery into the new instance (-want +got):\n%s", diff)
	}
	checkCount(t, s, "bank", counted(0, again))
	checkWatermark(t, s, "bank", "w2")
	checkCount(t, s, oldKey, counted(0, old))
	st, err := s.Status(ctx, "bank")
	if err != nil || st.UID != uid2 || !st.RemovedAt.IsZero() {
		t.Errorf("Status(bank) = %+v, %v; want live under %s", st, err, uid2)
	}
}

// testClaimReplaces: a Plugin deleted and created again while the core did
// not see it (the core was down) is noticed by Claim, which marks the old
// instance removed before the new one is first called.
func testClaimReplaces(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	mustClaim(t, s, "bank", uid1)
	old := mustImport(t, s, "bank", store.KindSync, Sync("b1", 0, 10, "w1"))
	if key := mustClaim(t, s, "bank", uid1); key != "" {
		t.Errorf("Claim by the same UID moved rows to %q", key)
	}
	checkCount(t, s, "bank", counted(0, old))
	key := mustClaim(t, s, "bank", uid2)
	if key != "bank~0a1b2c3d" {
		t.Fatalf("Claim by another UID: key %q, want the old instance marked as bank~0a1b2c3d", key)
	}
	checkCount(t, s, key, counted(0, old))
	checkCount(t, s, "bank", store.PurgeCounts{})
	checkWatermark(t, s, "bank", "")
	// Two removed instances whose UIDs share their first 8 hex digits do
	// not share a key.
	const twin = "0a1b2c3d-9999-4a4a-8b8b-000000000009"
	mustMark(t, s, "bank", uid2, removedAt)
	mustClaim(t, s, "bank", twin)
	mustImport(t, s, "bank", store.KindSync, Sync("b9", 0, 1, "w9"))
	key2 := mustMark(t, s, "bank", twin, removedAt)
	if key2 == key || !strings.HasPrefix(key2, "bank~") {
		t.Errorf("the twin's key %q; want another than %q", key2, key)
	}
	checkCount(t, s, key, counted(0, old))
}

// testMarkStale: MarkRemoved for a UID the store no longer holds under the
// name (a new Plugin claimed it meanwhile) changes nothing.
func testMarkStale(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	mustClaim(t, s, "bank", uid2)
	r := mustImport(t, s, "bank", store.KindSync, Sync("b1", 0, 10, "w1"))
	for _, uid := range []string{uid1, ""} {
		if key := mustMark(t, s, "bank", uid, removedAt); key != "" {
			t.Errorf("MarkRemoved(bank, %q) with the store holding %s moved the rows to %q", uid, uid2, key)
		}
	}
	if key := mustMark(t, s, "nothing", uid1, removedAt); key != "" {
		t.Errorf("MarkRemoved of an unknown name: %q", key)
	}
	checkCount(t, s, "bank", counted(0, r))
	checkWatermark(t, s, "bank", "w1")
}

func testPurgeExact(t *testing.T, b Backend) {
	ctx := context.Background()
	s := open(t, b.NewDSN(t))
	// Two removed instances of one name, and a live one of another, all
	// with the same source IDs and batch IDs.
	mustClaim(t, s, "bank", uid1)
	first := mustImport(t, s, "bank", store.KindSync, Sync("b1", 0, 30, "w1"))
	onePlace(t, s, "bank")
	key1 := mustMark(t, s, "bank", uid1, removedAt)
	mustClaim(t, s, "bank", uid2)
	second := mustImport(t, s, "bank", store.KindSync, Sync("b1", 0, 15, "w2"))
	key2 := mustMark(t, s, "bank", uid2, removedAt.Add(time.Minute))
	mustClaim(t, s, "live", uid3)
	live := mustImport(t, s, "live", store.KindSync, Sync("b1", 0, 25, "w3"))
	onePlace(t, s, "live")

	before := map[string]store.PurgeCounts{key1: counted(1, first), key2: counted(0, second), "live": counted(1, live)}
	for k, c := range before {
		checkCount(t, s, k, c)
	}

	preview, err := s.Purge(ctx, key1, true)
	if err != nil || preview != before[key1] {
		t.Errorf("Purge(%s, preview) = %+v, %v; want %+v", key1, preview, err, before[key1])
	}
	if preview.Total() == 0 {
		t.Fatal("the preview counted nothing")
	}
	for k, c := range before {
		checkCount(t, s, k, c) // the preview deleted nothing
	}

	got, err := s.Purge(ctx, key1, false)
	if err != nil || got != before[key1] {
		t.Errorf("Purge(%s) = %+v, %v; want %+v", key1, got, err, before[key1])
	}
	checkCount(t, s, key1, store.PurgeCounts{})
	checkUnknown(t, s, key1)
	checkCount(t, s, key2, before[key2])
	checkCount(t, s, "live", before["live"])
	checkWatermark(t, s, "live", "w3")
	removed, err := s.RemovedInstances(ctx)
	if err != nil || len(removed) != 1 || removed[0].Key != key2 {
		t.Errorf("RemovedInstances after the purge = %+v, %v; want %s alone", removed, err, key2)
	}
	if tx, err := s.Transaction(ctx, key2, SourceID(1)); err != nil || len(tx.GetPostings()) != 2 {
		t.Errorf("the other removed instance's transaction: %v, %v", tx, err)
	}
	// Purged is gone: a second purge finds nothing.
	if _, err := s.Purge(ctx, key1, false); !errors.Is(err, store.ErrUnknownInstance) {
		t.Errorf("second Purge(%s) = %v; want ErrUnknownInstance", key1, err)
	}
}

func testPurgeLive(t *testing.T, b Backend) {
	ctx := context.Background()
	s := open(t, b.NewDSN(t))
	mustClaim(t, s, "bank", uid1)
	r := mustImport(t, s, "bank", store.KindSync, Sync("b1", 0, 10, "w1"))
	onePlace(t, s, "view-only")
	for _, key := range []string{"bank", "view-only"} {
		for _, preview := range []bool{true, false} {
			if got, err := s.Purge(ctx, key, preview); !errors.Is(err, store.ErrLive) {
				t.Errorf("Purge(%s, preview %v) = %+v, %v; want ErrLive", key, preview, got, err)
			}
		}
	}
	checkCount(t, s, "bank", counted(0, r))
	checkCount(t, s, "view-only", store.PurgeCounts{ViewPlaces: 1})
	for _, key := range []string{"never", "bank~00000000"} {
		if _, err := s.Purge(ctx, key, false); !errors.Is(err, store.ErrUnknownInstance) {
			t.Errorf("Purge(%s) = %v; want ErrUnknownInstance", key, err)
		}
	}
}

func testRemovedValidation(t *testing.T, b Backend) {
	ctx := context.Background()
	s := open(t, b.NewDSN(t))
	refused := func(what string, err error, field string, rule error) {
		t.Helper()
		var ve *store.ValidationError
		if !errors.As(err, &ve) || !errors.Is(err, rule) || !strings.Contains(err.Error(), field+": ") {
			t.Errorf("%s = %v; want a refusal naming %s and its rule", what, err, field)
		}
	}
	long := strings.Repeat("a", store.MaxInstance+1)
	for _, name := range []string{"", "Bank", "bank~x", "-bank", long} {
		_, err := s.Claim(ctx, name, uid1, removedAt)
		refused("Claim(name "+name+")", err, "name", store.ErrInstanceName)
		_, err = s.MarkRemoved(ctx, name, uid1, removedAt)
		refused("MarkRemoved(name "+name+")", err, "name", store.ErrInstanceName)
	}
	for _, uid := range []string{"", "1234567", "0A1B2C3D-1111", "0a1b2c3d;drop", strings.Repeat("a", 65)} {
		_, err := s.Claim(ctx, "bank", uid, removedAt)
		refused("Claim(uid "+uid+")", err, "uid", store.ErrUID)
	}
	_, err := s.MarkRemoved(ctx, "bank", "x", removedAt)
	refused("MarkRemoved(uid x)", err, "uid", store.ErrUID)
	_, err = s.Claim(ctx, "bank", uid1, time.Time{})
	refused("Claim(no time)", err, "at", store.ErrRemovedAt)
	for _, key := range []string{"", "bank~", "bank~A", "bank~a~b", "~abc", "bank~" + strings.Repeat("a", 65), "bank~a b"} {
		_, err := s.Purge(ctx, key, true)
		refused("Purge("+key+")", err, "key", store.ErrKey)
		_, err = s.Status(ctx, key)
		refused("Status("+key+")", err, "instance", store.ErrKey)
	}
	names, err := s.Instances(ctx)
	if err != nil || len(names) != 0 {
		t.Errorf("refused calls left instances %v, %v", names, err)
	}
}

// testMigrationAdopts: rows stored by a core of schema version 2, before
// instances had UIDs, are live without UID after the migration; the first
// Claim adopts them (rows and watermark stay), and an instance without UID
// whose Plugin is gone is marked removed under a stable key of its own.
func testMigrationAdopts(t *testing.T, b Backend) {
	ctx := context.Background()
	dsn := b.NewDSN(t)
	old, err := b.OpenAt(ctx, dsn, 2)
	if err != nil {
		t.Fatal(err)
	}
	kept := mustImport(t, old, "bank", store.KindSync, Sync("b1", 0, 20, "w1"))
	gone := mustImport(t, old, "gone", store.KindSync, Sync("b1", 0, 5, "wg"))
	onePlace(t, old, "ledger")
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s := open(t, dsn)
	live, err := s.LiveInstances(ctx)
	want := []store.LiveInstance{{Name: "bank"}, {Name: "gone"}, {Name: "ledger"}}
	if err != nil || !cmp.Equal(want, live) {
		t.Errorf("LiveInstances after the migration = %+v, %v; want %+v", live, err, want)
	}
	if key := mustClaim(t, s, "bank", uid1); key != "" {
		t.Errorf("Claim of rows without UID moved them to %q; want them adopted", key)
	}
	checkCount(t, s, "bank", counted(0, kept))
	checkWatermark(t, s, "bank", "w1")
	if key := mustClaim(t, s, "ledger", uid2); key != "" {
		t.Errorf("Claim of a view's places without UID moved them to %q", key)
	}
	if places, err := s.ViewPlaces(ctx, "ledger"); err != nil || places[store.KindFxRates] != 1 {
		t.Errorf("the adopted view's places: %v, %v", places, err)
	}

	key := mustMark(t, s, "gone", "", removedAt)
	if !strings.HasPrefix(key, "gone~") || len(key) != len("gone~")+8 {
		t.Errorf("the key of a removed instance without UID: %q, want gone~ and 8 hex digits", key)
	}
	checkCount(t, s, key, counted(0, gone))
	removed, err := s.RemovedInstances(ctx)
	if err != nil || len(removed) != 1 || removed[0].Key != key || removed[0].UID != "" {
		t.Errorf("RemovedInstances = %+v, %v", removed, err)
	}
	// The key is stored: reopening lists the same one.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dsn)
	again, err := s.RemovedInstances(ctx)
	if err != nil || !cmp.Equal(removed, again) {
		t.Errorf("RemovedInstances after reopening = %+v, %v; want %+v", again, err, removed)
	}
}

// testViewsKeepRemoved: a removed instance's entries stay in the record
// views are sent, under the same numbers. A view that had them is not sent
// them again; a view installed after the removal is sent the same entries,
// naming the removed key as their source; once purged, a new view gets none.
func testViewsKeepRemoved(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	mustClaim(t, s, "bank", uid1)
	mustImport(t, s, "bank", store.KindSync, Sync("b1", 0, 12, "w1"))
	before := drain(t, s, "early", allKinds, 5)
	if len(before) == 0 {
		t.Fatal("the view was sent nothing before the removal")
	}
	key := mustMark(t, s, "bank", uid1, removedAt)

	if again := drain(t, s, "early", allKinds, 5); len(again) != 0 {
		t.Errorf("the removal sent a view that had every entry %d entries again", len(again))
	}
	late := drain(t, s, "late", allKinds, 5)
	seqs := func(es []store.Entry) []int64 {
		out := make([]int64, len(es))
		for i, e := range es {
			out[i] = e.Seq
		}
		return out
	}
	if diff := cmp.Diff(seqs(before), seqs(late)); diff != "" {
		t.Errorf("a view installed after the removal got other entries (-before +after):\n%s", diff)
	}
	for _, e := range late {
		if e.Source != key {
			t.Errorf("entry %d of %s names source %q, want the removed key %s", e.Seq, e.Kind, e.Source, key)
			break
		}
	}
	// The size counts the source's name, which the removal lengthened.
	if diff := cmp.Diff(before, late, protocmp.Transform(), cmpopts.IgnoreFields(store.Entry{}, "Source", "Size")); diff != "" {
		t.Errorf("the entries changed with the removal (-before +after):\n%s", diff)
	}

	if _, err := s.Purge(context.Background(), key, false); err != nil {
		t.Fatal(err)
	}
	if after := drain(t, s, "after-purge", allKinds, 5); len(after) != 0 {
		t.Errorf("a view installed after the purge was sent %d entries", len(after))
	}
}
