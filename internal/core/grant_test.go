package core

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/core/store"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// heldConnector answers Sync and ImportFile with one transaction, but only
// once the test releases the call it reports on entered.
type heldConnector struct {
	entered chan struct{}
	release chan struct{}
}

func newHeldConnector() *heldConnector {
	return &heldConnector{entered: make(chan struct{}, 4), release: make(chan struct{})}
}

func (h *heldConnector) hold() {
	h.entered <- struct{}{}
	<-h.release
}

func (h *heldConnector) Sync(_ context.Context, _ string, req *connectorv1.SyncRequest) (*connectorv1.Delivery, error) {
	h.hold()
	return transactions(req), nil
}

func (h *heldConnector) ImportFile(_ context.Context, _ string, fh *connectorv1.FileHeader, _ io.Reader) (*connectorv1.Delivery, error) {
	h.hold()
	return transactions(&connectorv1.SyncRequest{BatchId: fh.GetBatchId()}), nil
}

func (h *heldConnector) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-h.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the connector was not called")
	}
}

var accountsFx = Target{Instance: "fx", Connector: true, DataTiers: []string{TierAccounts}}

// noRows fails unless nothing is stored for fx.
func noRows(t *testing.T, st *store.Store) {
	t.Helper()
	status, err := st.Status(t.Context(), "fx")
	if err != nil && !errors.Is(err, store.ErrUnknownInstance) {
		t.Fatal(err)
	}
	if status.Rows != (store.RowCounts{}) {
		t.Fatalf("stored %+v: want nothing", status.Rows)
	}
}

// TestTierNarrowedDuringSync: the grant loses the accounts tier while a
// Sync is open; the transactions it then delivers are refused, named, and
// nothing is stored.
func TestTierNarrowedDuringSync(t *testing.T) {
	st := openStore(t)
	clk := newFakeClock()
	h := newHeldConnector()
	s := schedule(t, clk, h, st, SchedulerOptions{})
	s.Update([]Target{accountsFx})
	clk.fire(clk.next(t))
	h.waitEntered(t)
	s.Update([]Target{fx}) // the grant narrowed: no data tier
	close(h.release)
	if w := clk.next(t); w.d < time.Hour {
		t.Fatalf("waited %v: a retry", w.d)
	}
	status, err := st.Status(t.Context(), "fx")
	if err != nil {
		t.Fatal(err)
	}
	if status.LastOK || !strings.Contains(status.LastError, `needs the data tier "accounts"`) {
		t.Fatalf("last error %q, want the tier named", status.LastError)
	}
	noRows(t, st)
}

// TestRevokedDuringSync: the plugin stops running while a Sync is open;
// what it then delivers is not stored.
func TestRevokedDuringSync(t *testing.T) {
	st := openStore(t)
	clk := newFakeClock()
	h := newHeldConnector()
	s := schedule(t, clk, h, st, SchedulerOptions{})
	s.Update([]Target{accountsFx})
	clk.fire(clk.next(t))
	h.waitEntered(t)
	s.Update(nil)
	close(h.release)
	s.Wait()
	noRows(t, st)
}

// TestTierNarrowedDuringImport: the same for an owner's import, stored
// and previewed, and for a revocation while the import is open.
func TestTierNarrowedDuringImport(t *testing.T) {
	for name, tc := range map[string]struct {
		preview bool
		after   []Target
		want    error
	}{
		"import narrowed":  {false, []Target{fx}, ErrOutsideTiers},
		"preview narrowed": {true, []Target{fx}, ErrOutsideTiers},
		"import revoked":   {false, nil, ErrNotConnector},
	} {
		t.Run(name, func(t *testing.T) {
			st := openStore(t)
			clk := newFakeClock()
			h := newHeldConnector()
			s := schedule(t, clk, h, st, SchedulerOptions{})
			s.Update([]Target{accountsFx})
			errc := make(chan error, 1)
			go func() {
				_, err := s.ImportFile(context.Background(), "fx", "statement.csv", "text/csv", tc.preview, strings.NewReader("a;b\n"))
				errc <- err
			}()
			h.waitEntered(t)
			s.Update(tc.after)
			close(h.release)
			if err := <-errc; !errors.Is(err, tc.want) {
				t.Fatalf("ImportFile: %v, want %v", err, tc.want)
			}
			noRows(t, st)
		})
	}
}
