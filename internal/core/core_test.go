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

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// setRunning writes the status the operator writes for a running connector
// (or, with running false, for a revoked grant).
func setRunning(t *testing.T, cl client.Client, name string, running bool, tiers ...string) {
	t.Helper()
	var p v1alpha1.Plugin
	if err := cl.Get(t.Context(), client.ObjectKey{Namespace: plugins.Namespace, Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRunning, Message: "runs", ObservedGeneration: p.Generation}
	p.Status.Effective = &v1alpha1.EffectivePermissions{
		Capabilities: []v1alpha1.Capability{v1alpha1.Capability(plugins.CapabilityConnector)}, DataTiers: tiers,
	}
	if !running {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonNoGrant, "no grant"
		p.Status.Effective = nil
	}
	apimeta.SetStatusCondition(&p.Status.Conditions, cond)
	if err := cl.Status().Update(t.Context(), &p); err != nil {
		t.Fatal(err)
	}
}

func pluginToken(t *testing.T, cs kubernetes.Interface, name string) string {
	t.Helper()
	tok, _ := testutil.ServiceAccountToken(t, cs, plugins.Namespace, plugins.ServiceAccountName(name), plugins.AudienceCore)
	return tok
}

func ensureSA(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	testutil.EnsureServiceAccount(t, cs, plugins.Namespace, name)
}

// get sends a GET to url with an optional bearer token and decodes JSON.
func get(t *testing.T, url, token string, into any) int {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return getWith(t, url, h, into)
}

// getOwner sends a GET to the owner API at url with the owner's token.
func getOwner(t *testing.T, url, token string, into any) int {
	t.Helper()
	h := http.Header{}
	h.Set(ownerapi.HeaderOwnerToken, token)
	return getWith(t, url, h, into)
}

// getWith sends a GET to url with header and decodes JSON.
func getWith(t *testing.T, url string, header http.Header, into any) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	req.Header = header
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
	return resp.StatusCode
}

// TestCore runs the core against the API server, as its ServiceAccount with
// the RBAC of deploy/core, with a plugin served on loopback behind the SDK: a Plugin that runs as a connector is synced and
// its rows stored; the owner API shows the status and imports a file; the
// plugin API accepts the running plugin's token only; revoking the grant
// stops the calls and the plugin's access.
func TestCore(t *testing.T) {
	cs, cfg := cluster(t)
	cl := apiClient(t, cfg)
	url := servePlugin(t, jwksDir(t, cs), "core-fx", echoConnector{})
	st := openStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The core runs as its ServiceAccount with deploy/core's RBAC; any
	// request the API server refuses fails the test.
	asCore := applyCoreRBAC(t, cs, cfg)
	var refused []string
	var refusedMu sync.Mutex
	asCore.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusForbidden {
				refusedMu.Lock()
				refused = append(refused, req.Method+" "+req.URL.Path)
				refusedMu.Unlock()
			}
			return resp, err
		})
	})
	defer func() {
		refusedMu.Lock()
		defer refusedMu.Unlock()
		if len(refused) > 0 {
			t.Errorf("the API server refused the core (deploy/core lacks a rule): %v", refused)
		}
	}()
	c, err := Start(ctx, asCore, Options{
		Store: st, PluginAddr: "127.0.0.1:0", OwnerAddr: "127.0.0.1:0",
		Resolve:   func(string) string { return url },
		Scheduler: manualSchedule,
		Log:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	owner, pluginAPI := "http://"+c.OwnerAddr(), "http://"+c.PluginAddr()
	ownerTok := testutil.OwnerToken(t, cs, plugins.Namespace)

	if err := cl.Create(t.Context(), testutil.MakePlugin("core-fx", testutil.Image("fx")).Obj()); err != nil {
		t.Fatal(err)
	}
	ensureSA(t, cs, plugins.ServiceAccountName("core-fx"))
	token := pluginToken(t, cs, "core-fx")
	if code := get(t, pluginAPI+PathWhoAmI, token, nil); code != http.StatusUnauthorized {
		t.Fatalf("whoami before the plugin runs: %d, want 401", code)
	}
	setRunning(t, cl, "core-fx", true)

	testutil.Eventually(t, 20*time.Second, "the first sync stored", func() (bool, string) {
		var s ownerapi.InstanceStatus
		code := getOwner(t, owner+ownerapi.PathPluginPrefix+"core-fx/status", ownerTok, &s)
		return code == http.StatusOK && s.LastOK && s.Rows.FxRates == 2, fmt.Sprintf("%d %+v", code, s)
	})
	var s ownerapi.InstanceStatus
	getOwner(t, owner+ownerapi.PathPluginPrefix+"core-fx/status", ownerTok, &s)
	if !s.Scheduled || s.NextSync == nil || s.LastSync == nil || s.Watermark != "2026-11-27" || s.RowsTotal != 2 || s.IntervalSeconds <= 0 || s.Lag != nil {
		t.Errorf("status %+v", s)
	}
	var all []ownerapi.InstanceStatus
	if code := getOwner(t, owner+ownerapi.PathStatus, ownerTok, &all); code != http.StatusOK || len(all) != 1 || all[0].Plugin != "core-fx" {
		t.Errorf("all statuses: %d %+v", code, all)
	}

	var who map[string]string
	if code := get(t, pluginAPI+PathWhoAmI, token, &who); code != http.StatusOK || who["plugin"] != "core-fx" {
		t.Fatalf("whoami: %d %v", code, who)
	}

	// An owner's import: the file streams to ImportFile, the delivery is stored.
	post := func() (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, owner+ownerapi.PathPluginPrefix+"core-fx/import", strings.NewReader("a;b\n"))
		req.Header.Set(ownerapi.HeaderFileName, "../../statement.csv")
		req.Header.Set("Content-Type", "text/csv; charset=utf-8")
		req.Header.Set(ownerapi.HeaderOwnerToken, ownerTok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(); code != http.StatusOK || !strings.Contains(body, `"problems":1`) {
		t.Fatalf("import: %d %s", code, body)
	}

	// Revoking the grant: no more calls, the token no longer accepted.
	setRunning(t, cl, "core-fx", false)
	testutil.Eventually(t, 10*time.Second, "the scheduler to stop calling", func() (bool, string) {
		return len(c.Scheduler().Instances()) == 0, fmt.Sprint(c.Scheduler().Instances())
	})
	if code := get(t, pluginAPI+PathWhoAmI, token, nil); code != http.StatusUnauthorized {
		t.Errorf("whoami after the revocation: %d, want 401", code)
	}
	if code, body := post(); code != http.StatusNotFound {
		t.Errorf("import after the revocation: %d %s, want 404", code, body)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
