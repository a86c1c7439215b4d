package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/core/store"
)

// leaseCases are the leases and fences a core of several replicas relies on
// (store/leases.go): the same on SQLite, which a single core never uses
// them on, as on PostgreSQL.
var leaseCases = []struct {
	name string
	run  func(*testing.T, Backend)
}{
	{"LeaseClaimRenewExpire", testLeaseClaimRenewExpire},
	{"LeaseTakeoverFencesWrites", testLeaseTakeoverFences},
	{"LeaseExpiredFencesWrites", testLeaseExpiredFences},
	{"LeaseReleaseHandsOver", testLeaseRelease},
	{"LeaseRevokedByRemoval", testLeaseRevokedByRemoval},
	{"LeaseReplicasCounted", testLeaseReplicasCounted},
}

func mustAcquire(t *testing.T, s *store.Store, instance, owner string, ttl time.Duration) (int64, bool) {
	t.Helper()
	e, ok, err := s.AcquireLease(context.Background(), instance, owner, "10.0.0.1:8081", ttl)
	if err != nil {
		t.Fatalf("AcquireLease(%s, %s): %v", instance, owner, err)
	}
	return e, ok
}

func testLeaseClaimRenewExpire(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	ctx := context.Background()
	// Long enough for a loaded machine to renew in time; b's is short.
	const ttl, short = time.Second, 300 * time.Millisecond
	e1, ok := mustAcquire(t, s, "nbp-fx", "a", ttl)
	if !ok || e1 != 1 {
		t.Fatalf("first claim: epoch %d, %v; want 1, true", e1, ok)
	}
	if _, ok := mustAcquire(t, s, "nbp-fx", "b", ttl); ok {
		t.Fatal("b claimed a lease a holds")
	}
	if e, ok := mustAcquire(t, s, "nbp-fx", "a", ttl); !ok || e != e1 {
		t.Fatalf("a claiming its own lease again: epoch %d, %v; want %d, true", e, ok, e1)
	}
	mustAcquire(t, s, "mbank", "a", ttl)
	mustAcquire(t, s, "ing", "b", short)
	// Renewing, well inside the lease, keeps a's two leases past their
	// first expiry; b's lapses.
	for range 4 {
		time.Sleep(300 * time.Millisecond)
		got, err := s.RenewLeases(ctx, "a", ttl)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Epoch != 1 || got[1].Epoch != 1 {
			t.Fatalf("RenewLeases(a) = %+v, want mbank and nbp-fx at epoch 1", got)
		}
	}
	held, err := s.HeldLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 2 || held[0] != (store.Lease{Instance: "mbank", Owner: "a", Epoch: 1, Address: "10.0.0.1:8081"}) || held[1].Instance != "nbp-fx" {
		t.Fatalf("HeldLeases = %+v, want a's two", held)
	}
	if got, err := s.RenewLeases(ctx, "b", ttl); err != nil || len(got) != 0 {
		t.Fatalf("RenewLeases(b) after its lease expired = %+v, %v; want none", got, err)
	}
	// b's lapsed lease is taken again under a new epoch, by anyone.
	if e, ok := mustAcquire(t, s, "ing", "a", ttl); !ok || e != 2 {
		t.Fatalf("claiming an expired lease: epoch %d, %v; want 2, true", e, ok)
	}
}

// fencedImport imports a delivery for instance under fence f.
func fencedImport(s *store.Store, f store.Fence, batch string, first int) error {
	_, err := s.Import(store.WithFence(context.Background(), f), f.Instance, store.KindSync, Sync(batch, first, 2, batch))
	return err
}

func testLeaseTakeoverFences(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	ctx := context.Background()
	const ttl = time.Second
	ea, _ := mustAcquire(t, s, "nbp-fx", "a", ttl)
	fa := store.Fence{Instance: "nbp-fx", Owner: "a", Epoch: ea}
	if err := fencedImport(s, fa, "b1", 0); err != nil {
		t.Fatalf("a's write under its lease: %v", err)
	}
	if err := s.RecordSync(store.WithFence(ctx, fa), "nbp-fx", store.SyncRecord{At: time.Now(), OK: true, Next: time.Now()}); err != nil {
		t.Fatalf("a's sync record under its lease: %v", err)
	}
	time.Sleep(ttl + 100*time.Millisecond)
	eb, ok := mustAcquire(t, s, "nbp-fx", "b", ttl)
	if !ok || eb != ea+1 {
		t.Fatalf("takeover: epoch %d, %v; want %d, true", eb, ok, ea+1)
	}
	// a's late writes, of every kind, store nothing.
	late := map[string]error{
		"Import":      fencedImport(s, fa, "b2", 10),
		"RecordSync":  s.RecordSync(store.WithFence(ctx, fa), "nbp-fx", store.SyncRecord{At: time.Now(), Error: "late", Next: time.Now()}),
		"AdvanceView": s.AdvanceView(store.WithFence(ctx, fa), "nbp-fx", map[store.EntryKind]int64{store.KindPrices: 5}),
		"ResetView":   s.ResetView(store.WithFence(ctx, fa), "nbp-fx"),
		"Claim": func() error {
			_, err := s.Claim(store.WithFence(ctx, fa), "nbp-fx", "0f8fad5b-d9cb-469f-a165-70867728950e", time.Now())
			return err
		}(),
	}
	for name, err := range late {
		if !errors.Is(err, store.ErrFenced) {
			t.Errorf("%s after takeover: %v, want ErrFenced", name, err)
		}
	}
	checkWatermark(t, s, "nbp-fx", "b1")
	if st, err := s.Status(ctx, "nbp-fx"); err != nil || st.LastError != "" || st.UID != "" {
		t.Errorf("status after a's late writes: %+v, %v; want a's first record alone", st, err)
	}
	// The same epoch under another owner's name, or a fence of another
	// instance, passes nothing either.
	if err := fencedImport(s, store.Fence{Instance: "nbp-fx", Owner: "a", Epoch: eb}, "b3", 20); !errors.Is(err, store.ErrFenced) {
		t.Errorf("a's write with b's epoch: %v, want ErrFenced", err)
	}
	fb := store.Fence{Instance: "nbp-fx", Owner: "b", Epoch: eb}
	if _, err := s.Import(store.WithFence(ctx, fb), "mbank", store.KindSync, Sync("b4", 0, 1, "w")); !errors.Is(err, store.ErrFenced) {
		t.Errorf("a write of another instance under b's fence: %v, want ErrFenced", err)
	}
	if err := fencedImport(s, fb, "b5", 30); err != nil {
		t.Fatalf("b's write under its lease: %v", err)
	}
	checkWatermark(t, s, "nbp-fx", "b5")
}

func testLeaseExpiredFences(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	const ttl = 200 * time.Millisecond
	e, _ := mustAcquire(t, s, "nbp-fx", "a", ttl)
	f := store.Fence{Instance: "nbp-fx", Owner: "a", Epoch: e}
	time.Sleep(ttl + 100*time.Millisecond)
	// Nobody took it, and still: the store refuses a write after expiry.
	if err := fencedImport(s, f, "b1", 0); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("write after the lease expired: %v, want ErrFenced", err)
	}
	if _, err := s.Status(context.Background(), "nbp-fx"); !errors.Is(err, store.ErrUnknownInstance) {
		t.Errorf("the refused write left a record: %v", err)
	}
	// Claimed again by the same owner after expiry: a new epoch, and the
	// old one stays refused.
	e2, ok := mustAcquire(t, s, "nbp-fx", "a", ttl)
	if !ok || e2 != e+1 {
		t.Fatalf("re-claim after expiry: epoch %d, %v; want %d", e2, ok, e+1)
	}
	if err := fencedImport(s, f, "b1", 0); !errors.Is(err, store.ErrFenced) {
		t.Errorf("write under the old epoch: %v, want ErrFenced", err)
	}
}

func testLeaseRelease(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	ctx := context.Background()
	e, _ := mustAcquire(t, s, "nbp-fx", "a", time.Hour)
	if err := s.ReleaseLease(ctx, "nbp-fx", "a", e+7); err != nil {
		t.Fatal(err)
	}
	if _, ok := mustAcquire(t, s, "nbp-fx", "b", time.Hour); ok {
		t.Fatal("a release under another epoch released the lease")
	}
	if err := s.ReleaseLease(ctx, "nbp-fx", "a", e); err != nil {
		t.Fatal(err)
	}
	if eb, ok := mustAcquire(t, s, "nbp-fx", "b", time.Hour); !ok || eb != e+1 {
		t.Fatalf("claim after release: epoch %d, %v; want %d, true", eb, ok, e+1)
	}
	if got, err := s.RenewLeases(ctx, "a", time.Hour); err != nil || len(got) != 0 {
		t.Errorf("a renews after releasing: %+v, %v", got, err)
	}
}

func testLeaseRevokedByRemoval(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	ctx := context.Background()
	const uid = "0f8fad5b-d9cb-469f-a165-70867728950e"
	e, _ := mustAcquire(t, s, "nbp-fx", "a", time.Hour)
	f := store.Fence{Instance: "nbp-fx", Owner: "a", Epoch: e}
	if _, err := s.Claim(store.WithFence(ctx, f), "nbp-fx", uid, time.Now()); err != nil {
		t.Fatalf("claim under the lease: %v", err)
	}
	if err := fencedImport(s, f, "b1", 0); err != nil {
		t.Fatal(err)
	}
	mustMark(t, s, "nbp-fx", uid, time.Now())
	// A replica whose watch has not seen the removal stores nothing more
	// under the name.
	if err := fencedImport(s, f, "b2", 10); !errors.Is(err, store.ErrFenced) {
		t.Errorf("write after the instance was marked removed: %v, want ErrFenced", err)
	}
	checkUnknown(t, s, "nbp-fx")
}

func testLeaseReplicasCounted(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	ctx := context.Background()
	count := func() int {
		t.Helper()
		n, err := s.LiveReplicas(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, hb := range []struct {
		owner string
		ttl   time.Duration
	}{{"a", time.Hour}, {"b", time.Hour}, {"c", 200 * time.Millisecond}, {"a", time.Hour}} {
		if err := s.Heartbeat(ctx, hb.owner, hb.ttl); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(); n != 3 {
		t.Fatalf("LiveReplicas = %d, want 3 (a twice is one)", n)
	}
	time.Sleep(300 * time.Millisecond)
	if n := count(); n != 2 {
		t.Errorf("LiveReplicas after c's heartbeat expired = %d, want 2", n)
	}
	if err := s.Depart(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Errorf("LiveReplicas after b departed = %d, want 1", n)
	}
	// The heartbeats are no instance's lease: never listed, never renewed.
	mustAcquire(t, s, "nbp-fx", "a", time.Hour)
	if held, err := s.HeldLeases(ctx); err != nil || len(held) != 1 || held[0].Instance != "nbp-fx" {
		t.Errorf("HeldLeases = %+v, %v; want nbp-fx alone", held, err)
	}
	if got, err := s.RenewLeases(ctx, "a", time.Hour); err != nil || len(got) != 1 || got[0].Instance != "nbp-fx" {
		t.Errorf("RenewLeases = %+v, %v; want nbp-fx alone", got, err)
	}
}
