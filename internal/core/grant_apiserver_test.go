//go:build cluster

package core

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/arkadiuss/openfief/internal/testutil"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// heldPlugin is a connector served behind the SDK whose Sync delivers one
// transaction, but only once the test releases it.
type heldPlugin struct {
	connectorv1connect.UnimplementedConnectorServiceHandler
	entered chan struct{}
	release chan struct{}
}

func (h heldPlugin) Sync(ctx context.Context, req *connect.Request[connectorv1.SyncRequest]) (*connect.Response[connectorv1.SyncResponse], error) {
	h.entered <- struct{}{}
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return connect.NewResponse(&connectorv1.SyncResponse{Delivery: transactions(req.Msg)}), nil
}

// target is the scheduler's view of instance's grant now.
func (s *Scheduler) target(instance string) (Target, bool) {
	s.mu.Lock()
	w, ok := s.workers[instance]
	s.mu.Unlock()
	if !ok {
		return Target{}, false
	}
	return w.getTarget(), true
}

// TestTierNarrowedDuringSyncOnAPIServer checks, on the real API server, that
// a tier revoked mid-Sync is enforced on what the Sync delivers: a Plugin
// runs with the accounts tier, its Sync is held open, the operator's status
// narrows the grant (accounts removed), and then the Sync delivers
// transactions. Nothing is stored and the recorded error names the tier.
func TestTierNarrowedDuringSyncOnAPIServer(t *testing.T) {
	cs, cfg := cluster(t)
	cl := apiClient(t, cfg)
	const name = "core-narrowed"
	h := heldPlugin{entered: make(chan struct{}, 1), release: make(chan struct{})}
	url := servePlugin(t, jwksDir(t, cs), name, h)
	st := openStore(t)
	c, err := Start(t.Context(), applyCoreRBAC(t, cs, cfg), Options{
		Store: st, PluginAddr: "127.0.0.1:0", OwnerAddr: "127.0.0.1:0",
		Resolve:   func(string) string { return url },
		Scheduler: manualSchedule,
		Log:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if err := cl.Create(t.Context(), testutil.MakePlugin(name, testutil.Image("bank")).Obj()); err != nil {
		t.Fatal(err)
	}
	setRunning(t, cl, name, true, TierAccounts)
	select {
	case <-h.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the core did not call Sync")
	}

	setRunning(t, cl, name, true) // the grant narrowed: no data tier
	testutil.Eventually(t, 10*time.Second, "the core to see the narrowed grant", func() (bool, string) {
		tg, ok := c.Scheduler().target(name)
		return ok && !slices.Contains(tg.DataTiers, TierAccounts), fmt.Sprintf("%v %+v", ok, tg)
	})
	close(h.release)

	testutil.Eventually(t, 10*time.Second, "the sync recorded", func() (bool, string) {
		s, err := st.Status(t.Context(), name)
		return err == nil && !s.LastSync.IsZero(), fmt.Sprintf("%+v %v", s, err)
	})
	s, err := st.Status(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	if s.LastOK || !strings.Contains(s.LastError, `needs the data tier "accounts"`) {
		t.Errorf("last error %q, want the tier named", s.LastError)
	}
	if s.Rows.Transactions != 0 || s.Rows.Postings != 0 || s.Rows.Batches != 0 {
		t.Errorf("stored %+v: want nothing of the account data", s.Rows)
	}
}
