package core

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/arkadiuss/openfief/internal/core/store"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	viewv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1/viewv1connect"
)

// The continuation of a restored core: six connectors import and a view
// exports while a backup is taken; a new core restored from it goes on to
// the end; what the view kept is compared with a run without the backup.

// genLimit is the syncs with data of each generated connector.
const genLimit = 15

// genConnectors are the six connector instances.
var genConnectors = []string{"bank-a", "bank-b", "bank-c", "broker-d", "fx-e", "fx-f"}

// genConnector delivers, for watermark n, the connector's (n+1)th FX rate
// and transaction with watermark n+1, and nothing once n is genLimit: what
// it sends is decided by the watermark alone, like a real connector's.
type genConnector struct{}

func (genConnector) Sync(_ context.Context, instance string, req *connectorv1.SyncRequest) (*connectorv1.Delivery, error) {
	w := 0
	if req.GetWatermark() != "" {
		var err error
		if w, err = strconv.Atoi(req.GetWatermark()); err != nil {
			return nil, err
		}
	}
	d := &connectorv1.Delivery{BatchId: req.GetBatchId(), Institution: &connectorv1.Institution{Id: "gen", Name: "Gen"}, Watermark: strconv.Itoa(w)}
	if w >= genLimit {
		return d, nil
	}
	n := w + 1
	i := slices.Index(genConnectors, instance)
	day := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, n).Format(time.DateOnly)
	d.Watermark = strconv.Itoa(n)
	d.FxRates = []*connectorv1.FxRate{{Date: day, BaseCurrency: []string{"USD", "EUR", "GBP", "CHF", "JPY", "CZK"}[i], QuoteCurrency: "PLN", Rate: fmt.Sprintf("%d.%04d", 1+i, n)}}
	d.Transactions = []*connectorv1.Transaction{{
		SourceId: fmt.Sprintf("%s-%03d", instance, n), Date: day, Description: "generated",
		Postings: []*connectorv1.Posting{
			{AccountId: "cash", Amount: "-1.00", Currency: "PLN"},
			{AccountId: "food", Amount: "1.00", Currency: "PLN"},
		},
	}}
	return d, nil
}

func (genConnector) ImportFile(context.Context, string, *connectorv1.FileHeader, io.Reader) (*connectorv1.Delivery, error) {
	return nil, fmt.Errorf("not generated")
}

// fastClock is the wall clock with every wait cut to a few milliseconds, so
// the workers sync and export as fast as the store allows.
type fastClock struct{}

func (fastClock) Now() time.Time { return time.Now() }
func (fastClock) After(d time.Duration) <-chan time.Time {
	return time.After(min(d, 3*time.Millisecond))
}

// dedupView is a view on loopback that keeps an entry unless its sequence
// is not above the largest it kept of that kind, as the view contract
// suggests, and records every entry it received.
type dedupView struct {
	mu       sync.Mutex
	largest  map[string]uint64
	received []viewEntryKey
	kept     []viewEntryKey
}

// viewEntryKey is an entry as the comparison sees it: its number, kind and
// content (the connector's natural key and values).
type viewEntryKey struct {
	seq     uint64
	kind    string
	content string
}

func (v *dedupView) Export(_ context.Context, r *connect.Request[viewv1.ExportRequest]) (*connect.Response[viewv1.ExportResponse], error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, e := range r.Msg.GetEntries() {
		k := viewEntryKey{seq: e.GetSequence()}
		switch x := e.GetEntry().(type) {
		case *viewv1.Entry_FxRate:
			k.kind, k.content = "fx_rates", e.GetSource()+"/"+x.FxRate.GetDate()+"/"+x.FxRate.GetBaseCurrency()+"/"+x.FxRate.GetRate()
		case *viewv1.Entry_Transaction:
			k.kind, k.content = "transactions", e.GetSource()+"/"+x.Transaction.GetSourceId()
		default:
			k.kind, k.content = "other", fmt.Sprint(e)
		}
		v.received = append(v.received, k)
		if k.seq > v.largest[k.kind] {
			v.largest[k.kind] = k.seq
			v.kept = append(v.kept, k)
		}
	}
	return connect.NewResponse(&viewv1.ExportResponse{}), nil
}

func (v *dedupView) snapshot() (received, kept []viewEntryKey) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.received), slices.Clone(v.kept)
}

func serveDedupView(t *testing.T) (*dedupView, string) {
	v := &dedupView{largest: map[string]uint64{}}
	mux := http.NewServeMux()
	mux.Handle(viewv1connect.NewViewServiceHandler(v))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return v, srv.URL
}

// genTotal is every entry the six connectors deliver: a rate and a
// transaction per sync with data.
const genTotal = 2 * genLimit * 6

// rig is a core's workers on one store: the scheduler calling the six
// connectors and the views exporting to "view".
type rig struct {
	cancel context.CancelFunc
	sched  *Scheduler
	views  *Views
}

func genTargets() []Target {
	var ts []Target
	for _, c := range genConnectors {
		ts = append(ts, Target{Instance: c, Connector: true, DataTiers: []string{TierAccounts}})
	}
	return append(ts, Target{Instance: "view", View: true, DataTiers: []string{TierAccounts}})
}

func startRig(st *store.Store, viewURL string) *rig {
	ctx, cancel := context.WithCancel(context.Background())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	x := &Exporter{Store: st, Caller: &Caller{Tokens: testTokens{}, Resolve: func(string) string { return viewURL }}, PageEntries: 16}
	views := NewViews(ctx, ViewOptions{Exporter: x, Store: st, Clock: fastClock{}, Settle: -1, FirstDelay: -1, Log: quiet})
	sched := NewScheduler(ctx, SchedulerOptions{
		Store: st, Connector: genConnector{}, Clock: fastClock{}, FirstSyncDelay: -1, Jitter: -1, Log: quiet, OnStored: views.Poke,
	})
	r := &rig{cancel: cancel, sched: sched, views: views}
	sched.Update(genTargets())
	views.Update(genTargets())
	return r
}

// stopWorkers stops every worker and waits for them, as a restore or a
// final backup does.
func (r *rig) stopWorkers() {
	r.sched.StopAll()
	r.views.Update(nil)
}

func (r *rig) stop() {
	r.stopWorkers()
	r.cancel()
	r.sched.Wait()
	r.views.Wait()
}

// waitKept waits until the view has kept n different entries.
func waitKept(t *testing.T, v *dedupView, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		_, kept := v.snapshot()
		if len(contents(kept)) >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, kept := v.snapshot()
	t.Fatalf("the view kept %d different entries, want %d", len(contents(kept)), n)
}

// contents counts the entries by content.
func contents(es []viewEntryKey) map[string]int {
	out := map[string]int{}
	for _, e := range es {
		out[e.kind+" "+e.content]++
	}
	return out
}

// testContinuation runs the comparison on the databases newDSN makes.
func testContinuation(t *testing.T, newDSN func(t *testing.T) string) {
	ctx := context.Background()
	openAt := func() *store.Store {
		st, err := store.Open(ctx, newDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	// The run without a backup.
	refView, refURL := serveDedupView(t)
	ref := startRig(openAt(), refURL)
	waitKept(t, refView, genTotal)
	ref.stop()
	_, refKept := refView.snapshot()
	want := contents(refKept)
	if len(want) != genTotal || len(refKept) != genTotal {
		t.Fatalf("the run without a backup: the view kept %d entries, %d different; want %d", len(refKept), len(want), genTotal)
	}

	for _, final := range []bool{false, true} {
		name := "live"
		if final {
			name = "final"
		}
		t.Run(name, func(t *testing.T) {
			view, url := serveDedupView(t)
			src := openAt()
			old := startRig(src, url)
			waitKept(t, view, genTotal/3)
			if final {
				old.stopWorkers() // ?stop=true
			}
			var raw bytes.Buffer
			snapshotAt := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
			if _, err := src.Backup(ctx, &raw, store.BackupOptions{Now: snapshotAt}); err != nil {
				t.Fatal(err)
			}
			if !final {
				waitKept(t, view, genTotal/2) // the old core works on after the snapshot
			}
			old.stop()

			// Restored as it is, the record is exactly the backup.
			exact := openAt()
			if _, err := exact.Restore(ctx, bytes.NewReader(raw.Bytes()), store.RestoreOptions{}); err != nil {
				t.Fatal(err)
			}
			var again bytes.Buffer
			if _, err := exact.Backup(ctx, &again, store.BackupOptions{Now: snapshotAt}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(gunzip(t, raw.Bytes()), gunzip(t, again.Bytes())) {
				t.Fatal("the restored record differs from the backup")
			}

			snapshotMax := maxSeq(t, exact)

			// Restored as the core restores, and continued.
			dst := openAt()
			if _, err := dst.Restore(ctx, bytes.NewReader(raw.Bytes()), store.RestoreOptions{Adopt: true, NewNumbers: true}); err != nil {
				t.Fatal(err)
			}
			places, err := dst.ViewPlaces(ctx, "view")
			if err != nil {
				t.Fatal(err)
			}
			before, _ := view.snapshot()
			next := startRig(dst, url)
			waitKept(t, view, genTotal)
			next.stop()
			received, kept := view.snapshot()

			// Nothing lost, nothing the run without a backup lacks.
			got := contents(kept)
			for k := range want {
				if got[k] == 0 {
					t.Errorf("lost: %s", k)
				}
			}
			for k := range got {
				if want[k] == 0 {
					t.Errorf("kept but never delivered: %s", k)
				}
			}
			// No entry the view had at the snapshot is sent again, and no
			// number means two entries.
			for _, e := range received[len(before):] {
				if int64(e.seq) <= places[store.EntryKind(e.kind)] {
					t.Errorf("sent again after the restore: %s %d (the view's place was %d)", e.kind, e.seq, places[store.EntryKind(e.kind)])
				}
			}
			bySeq := map[uint64]string{}
			for _, e := range received {
				if c, ok := bySeq[e.seq]; ok && c != e.content {
					t.Errorf("number %d means %s and %s", e.seq, c, e.content)
				}
				bySeq[e.seq] = e.content
			}
			// Kept twice: none from a final backup; from a live one only
			// entries the old core stored after its snapshot.
			twice := 0
			first := map[string]uint64{}
			for _, e := range kept {
				if _, ok := first[e.kind+" "+e.content]; !ok {
					first[e.kind+" "+e.content] = e.seq
				}
			}
			for k, n := range got {
				if n > 1 {
					twice++
					if final || int64(first[k]) <= snapshotMax {
						t.Errorf("kept twice: %s (first as %d; the snapshot's entries end at %d)", k, first[k], snapshotMax)
					}
				}
			}
			t.Logf("%s backup: %d entries kept before the restore, %d received in all, %d kept, %d kept twice (stored by the old core after its snapshot)",
				name, len(contents(before)), len(received), len(kept), twice)
		})
	}
}

// maxSeq is the largest entry number st holds (read as a new view would).
func maxSeq(t *testing.T, st *store.Store) int64 {
	t.Helper()
	var last int64
	for {
		p, err := st.ReadPage(context.Background(), "probe", store.EntryKinds, store.PageBounds{Entries: store.MaxPageEntries})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Entries {
			last = max(last, e.Seq)
		}
		if err := st.AdvanceView(context.Background(), "probe", p.Places); err != nil {
			t.Fatal(err)
		}
		if !p.More {
			return last
		}
	}
}

func gunzip(t *testing.T, raw []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRestoredCoreContinues: on SQLite, a backup taken while six connectors
// import and a view exports restores into a new core that goes on from the
// connectors' watermarks and the view's places; the view then holds what a
// run without the backup gave it, with no entry it had at the snapshot sent
// again. PostgreSQL's run is TestRestoredCoreContinuesPostgres (heavy).
func TestRestoredCoreContinues(t *testing.T) {
	testContinuation(t, func(t *testing.T) string { return filepath.Join(t.TempDir(), "core.db") })
}

// ownerCore is a Core with its workers on st and the owner API's routes on
// loopback (without the token check, which RequireOwner's own tests cover).
func ownerCore(t *testing.T, st *store.Store, viewURL string) (*Core, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	x := &Exporter{Store: st, Caller: &Caller{Tokens: testTokens{}, Resolve: func(string) string { return viewURL }}, PageEntries: 16}
	c := &Core{store: st, log: quiet}
	c.views = NewViews(ctx, ViewOptions{Exporter: x, Store: st, Clock: fastClock{}, Settle: -1, FirstDelay: -1, Log: quiet})
	c.sched = NewScheduler(ctx, SchedulerOptions{Store: st, Connector: genConnector{}, Clock: fastClock{}, FirstSyncDelay: -1, Jitter: -1, Log: quiet, OnStored: c.views.Poke})
	srv := httptest.NewServer(c.ownerRoutes())
	t.Cleanup(func() {
		srv.Close()
		c.gate.mu.Lock()
		c.stopWorkers()
		c.gate.mu.Unlock()
		cancel()
		c.sched.Wait()
		c.views.Wait()
	})
	c.onPlugins(genTargets())
	return c, srv.URL
}

// TestOwnerBackupRestore: through the owner API, a backup streams while the
// connectors import; a restore into a core that holds data is refused
// without replace (its record unchanged), and with it replaces the record
// with the scheduler paused, then calls the connectors again from the
// restored watermarks. A final backup (?stop=true) leaves the core calling
// nothing, and refusing imports, until a restore.
func TestOwnerBackupRestore(t *testing.T) {
	ctx := context.Background()
	_, viewURL := serveDedupView(t)
	src := openStore(t)
	_, srcURL := ownerCore(t, src, viewURL)
	waitWatermark(t, src, "bank-a", 5)
	resp, err := http.Get(srcURL + "/v1/backup")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/gzip" {
		t.Fatalf("backup: %d %v, %v", resp.StatusCode, resp.Header, err)
	}
	backedUp, err := src.Watermark(ctx, "bank-a")
	if err != nil {
		t.Fatal(err)
	}

	// A second core that has synced to the end.
	dst := openStore(t)
	c, dstURL := ownerCore(t, dst, viewURL)
	waitWatermark(t, dst, "bank-a", genLimit)
	restore := func(query string) (*http.Response, string) {
		resp, err := http.Post(dstURL+"/v1/restore"+query, "application/gzip", bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return resp, string(body)
	}
	c.gate.mu.Lock()
	c.stopWorkers() // hold the record still to compare it
	c.gate.stopped = true
	c.gate.mu.Unlock()
	var before bytes.Buffer
	if _, err := dst.Backup(ctx, &before, store.BackupOptions{Now: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	if resp, body := restore(""); resp.StatusCode != http.StatusConflict || !bytes.Contains([]byte(body), []byte("not empty")) {
		t.Fatalf("restore into a core that holds data = %d %s, want 409 naming it", resp.StatusCode, body)
	}
	var after bytes.Buffer
	if _, err := dst.Backup(ctx, &after, store.BackupOptions{Now: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gunzip(t, before.Bytes()), gunzip(t, after.Bytes())) {
		t.Fatal("a refused restore changed the record")
	}
	// A refused restore leaves a stopped core stopped (a final backup's):
	// it does not start calling plugins again.
	c.gate.mu.Lock()
	stillStopped := c.gate.stopped && !c.gate.restoring
	c.gate.mu.Unlock()
	if !stillStopped {
		t.Fatal("a refused restore started a stopped core's workers again")
	}
	if resp, body := restore("?replace=true"); resp.StatusCode != http.StatusOK {
		t.Fatalf("restore with replace = %d %s", resp.StatusCode, body)
	}
	if c.paused() != nil {
		t.Fatalf("the core is still paused after the restore: %v", c.paused())
	}
	// The connectors went on from the restored watermark, to the end.
	if w, _ := strconv.Atoi(backedUp); w >= genLimit {
		t.Fatalf("the backup was taken at the end (watermark %s): the test proves nothing", backedUp)
	}
	waitWatermark(t, dst, "bank-a", genLimit)
	st, err := dst.Status(ctx, "bank-a")
	if err != nil || st.Rows.Transactions != genLimit {
		t.Errorf("after the restore bank-a holds %d transactions (%v), want %d", st.Rows.Transactions, err, genLimit)
	}

	// A final backup stops the core.
	resp, err = http.Get(dstURL + "/v1/backup?stop=true")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if !errors.Is(c.paused(), ErrStopped) || len(c.sched.Instances()) != 0 || len(c.views.Instances()) != 0 {
		t.Fatalf("after a final backup: paused %v, connectors %v, views %v", c.paused(), c.sched.Instances(), c.views.Instances())
	}
	resp, err = http.Post(dstURL+"/v1/plugins/bank-a/import", "text/csv", bytes.NewReader(nil))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("an import after a final backup = %d, want 503", resp.StatusCode)
	}
	if resp, body := restore("?replace=true"); resp.StatusCode != http.StatusOK || c.paused() != nil || len(c.sched.Instances()) != len(genConnectors) {
		t.Fatalf("restore after a final backup = %d %s; paused %v, connectors %v", resp.StatusCode, body, c.paused(), c.sched.Instances())
	}
}

// waitWatermark waits until instance's watermark is at least n.
func waitWatermark(t *testing.T, st *store.Store, instance string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		w, err := st.Watermark(context.Background(), instance)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := strconv.Atoi(w); got >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s's watermark did not reach %d", instance, n)
}
