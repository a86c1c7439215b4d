package core

import (
	"testing"
)

// TestNewUIDIsNewInstance: a Plugin of the same name with another UID is
// another instance. The scheduler stops the old worker and the new one
// claims the name before its first call, which marks the old instance's
// data removed even when no marking round saw the old Plugin go (the core
// was down): the new instance's first Sync gets no watermark, and the old
// data is kept under its removed key.
func TestNewUIDIsNewInstance(t *testing.T) {
	const uid1, uid2 = "0a1b2c3d-1111-4a4a-8b8b-000000000001", "9f8e7d6c-2222-4a4a-8b8b-000000000002"
	st := openStore(t)
	clk := newFakeClock()
	c := newScripted(rates("2026-11-27"), rates("2026-11-28"))
	s := schedule(t, clk, c, st, SchedulerOptions{FirstSyncDelay: -1})

	s.Update([]Target{{Instance: "fx", UID: uid1, Connector: true}})
	clk.fire(clk.next(t))
	clk.next(t) // the wait after the first sync
	if rec, err := st.Status(t.Context(), "fx"); err != nil || rec.UID != uid1 || rec.Rows.FxRates != 2 {
		t.Fatalf("after the first instance's sync: %+v, %v", rec, err)
	}

	s.Update([]Target{{Instance: "fx", UID: uid2, Connector: true}})
	clk.fire(clk.next(t))
	clk.next(t)
	reqs := c.requests()
	if len(reqs) != 2 || reqs[1].GetWatermark() != "" {
		t.Fatalf("requests %v: the new instance's first Sync must get no watermark", reqs)
	}
	rec, err := st.Status(t.Context(), "fx")
	if err != nil || rec.UID != uid2 || rec.Rows.FxRates != 2 || rec.Rows.Batches != 1 || rec.Watermark != "2026-11-28" {
		t.Errorf("the new instance: %+v, %v; want its own rows and watermark only", rec, err)
	}
	old, err := st.Status(t.Context(), "fx~0a1b2c3d")
	if err != nil || old.RemovedAt.IsZero() || old.Rows.FxRates != 2 || old.Watermark != "2026-11-27" {
		t.Errorf("the old instance's kept data: %+v, %v", old, err)
	}
}
