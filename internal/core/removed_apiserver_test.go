//go:build cluster

package core

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// watermarks is echoConnector recording the watermark of every Sync.
type watermarks struct {
	echoConnector
	mu   sync.Mutex
	seen []string
}

func (w *watermarks) Sync(ctx context.Context, req *connect.Request[connectorv1.SyncRequest]) (*connect.Response[connectorv1.SyncResponse], error) {
	w.mu.Lock()
	w.seen = append(w.seen, req.Msg.GetWatermark())
	w.mu.Unlock()
	return w.echoConnector.Sync(ctx, req)
}

func (w *watermarks) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}

// postOwner sends a POST to the owner API with token (none when empty) and
// decodes a 200 answer into into.
func postOwner(t *testing.T, url, token string, into any) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, nil)
	if token != "" {
		req.Header.Set(ownerapi.HeaderOwnerToken, token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if into != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, into); err != nil {
			t.Fatalf("%s: %v in %s", url, err, body)
		}
	}
	return resp.StatusCode, string(body)
}

// TestRemovedInstanceOnAPIServer: on the real API server, a connector is
// installed and synced; deleting its Plugin marks its data removed (kept,
// listed with when); a Plugin created again under the same name is a new
// instance whose first Sync gets no watermark and whose rows are stored
// again, while the old data stays listed; a new Plugin that stops running
// keeps its data under its name; the owner purges the old data.
func TestRemovedInstanceOnAPIServer(t *testing.T) {
	cs, cfg := cluster(t)
	cl := apiClient(t, cfg)
	const name = "core-removed"
	conn := &watermarks{}
	url := servePlugin(t, jwksDir(t, cs), name, conn)
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
	owner := "http://" + c.OwnerAddr()
	ownerTok := testutil.OwnerToken(t, cs, plugins.Namespace)
	// The status of this test's instances: other tests' Plugins share the
	// API server.
	statuses := func() []ownerapi.InstanceStatus {
		var all, ours []ownerapi.InstanceStatus
		if code := getOwner(t, owner+ownerapi.PathStatus, ownerTok, &all); code != http.StatusOK {
			t.Fatalf("status: %d", code)
		}
		for _, s := range all {
			if s.Plugin == name {
				ours = append(ours, s)
			}
		}
		return ours
	}
	install := func() string {
		t.Helper()
		p := testutil.MakePlugin(name, testutil.Image("fx")).Obj()
		if err := cl.Create(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		setRunning(t, cl, name, true)
		return string(p.UID)
	}

	uid1 := install()
	testutil.Eventually(t, 20*time.Second, "the first sync stored", func() (bool, string) {
		s, err := st.Status(t.Context(), name)
		return err == nil && s.LastOK && s.Rows.FxRates == 2, fmt.Sprintf("%+v %v", s, err)
	})
	if got := conn.list(); len(got) != 1 || got[0] != "" {
		t.Fatalf("watermarks sent %q, want one empty (the first sync)", got)
	}
	if s, _ := st.Status(t.Context(), name); s.UID != uid1 {
		t.Errorf("the instance's UID %q, want the Plugin's %q", s.UID, uid1)
	}

	// Uninstalled: the data is kept under a key of its own, marked removed.
	if err := cl.Delete(t.Context(), &v1alpha1.Plugin{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plugins.Namespace}}); err != nil {
		t.Fatal(err)
	}
	key := name + "~" + strings.ReplaceAll(uid1, "-", "")[:8]
	testutil.Eventually(t, 20*time.Second, "the instance marked removed", func() (bool, string) {
		all := statuses()
		return len(all) == 1 && all[0].Removed && all[0].Instance == key, fmt.Sprintf("%+v", all)
	})
	old := statuses()[0]
	if old.Plugin != name || old.RemovedAt == nil || old.Rows.FxRates != 2 || old.Scheduled || old.Watermark != "2026-11-27" {
		t.Errorf("the removed instance's status %+v", old)
	}
	if _, ok := c.Scheduler().NextSync(name); ok {
		t.Errorf("the scheduler still calls %s", name)
	}
	var one ownerapi.InstanceStatus
	if code := getOwner(t, owner+ownerapi.StatusPath(key), ownerTok, &one); code != http.StatusOK || !one.Removed || one.Rows.FxRates != 2 {
		t.Errorf("status of %s: %d %+v", key, code, one)
	}

	// Installed again under the same name: a new instance, starting fresh.
	uid2 := install()
	if uid2 == uid1 {
		t.Fatal("the API server gave the new Plugin the old UID")
	}
	testutil.Eventually(t, 20*time.Second, "the new instance's first sync stored", func() (bool, string) {
		s, err := st.Status(t.Context(), name)
		return err == nil && s.LastOK && s.Rows.FxRates == 2 && s.UID == uid2, fmt.Sprintf("%+v %v", s, err)
	})
	if got := conn.list(); len(got) != 2 || got[1] != "" {
		t.Errorf("watermarks sent %q; the new instance's first Sync must get none, not the old one's", got)
	}
	all := statuses()
	if len(all) != 2 || all[0].Instance != name || all[0].Removed || all[1].Instance != key || !all[1].Removed || all[1].Rows.FxRates != 2 {
		t.Errorf("statuses after the reinstall: %+v", all)
	}

	// Revoked, not uninstalled: the data stays under the name.
	setRunning(t, cl, name, false)
	testutil.Eventually(t, 10*time.Second, "the scheduler to stop calling", func() (bool, string) {
		_, ok := c.Scheduler().NextSync(name)
		return !ok, fmt.Sprint(c.Scheduler().Instances())
	})
	time.Sleep(200 * time.Millisecond) // a marking would run right after the stop
	if s, err := st.Status(t.Context(), name); err != nil || s.Rows.FxRates != 2 || !s.RemovedAt.IsZero() {
		t.Errorf("the revoked instance: %+v %v; want its data live under its name", s, err)
	}

	// Purge: the owner only; never a live instance; preview deletes nothing.
	if code, body := postOwner(t, owner+ownerapi.PurgePath(key, false), "", nil); code != http.StatusUnauthorized {
		t.Errorf("purge without the owner's token: %d %s", code, body)
	}
	if code, body := postOwner(t, owner+ownerapi.PurgePath(name, false), ownerTok, nil); code != http.StatusConflict || !strings.Contains(body, "live") {
		t.Errorf("purge of the live instance: %d %s, want 409", code, body)
	}
	var pr ownerapi.PurgeResponse
	if code, body := postOwner(t, owner+ownerapi.PurgePath(key, true), ownerTok, &pr); code != http.StatusOK ||
		!pr.Preview || pr.Rows.FxRates != 2 || pr.Rows.Batches != 1 || pr.RowsTotal != 3 {
		t.Errorf("preview: %d %s", code, body)
	}
	if len(statuses()) != 2 {
		t.Errorf("the preview deleted something: %+v", statuses())
	}
	if code, body := postOwner(t, owner+ownerapi.PurgePath(key, false), ownerTok, &pr); code != http.StatusOK || pr.Preview || pr.RowsTotal != 3 {
		t.Errorf("purge: %d %s", code, body)
	}
	all = statuses()
	if len(all) != 1 || all[0].Instance != name || all[0].Rows.FxRates != 2 {
		t.Errorf("statuses after the purge: %+v", all)
	}
	if code, _ := postOwner(t, owner+ownerapi.PurgePath(key, false), ownerTok, nil); code != http.StatusNotFound {
		t.Errorf("second purge: %d, want 404", code)
	}
	if code, _ := postOwner(t, owner+ownerapi.PurgePath("Bad~KEY", false), ownerTok, nil); code != http.StatusBadRequest {
		t.Errorf("purge of a malformed key: %d, want 400", code)
	}
	_ = cl.Delete(t.Context(), &v1alpha1.Plugin{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plugins.Namespace}})
}
