//go:build cluster

package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/attention"
	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// statusCore is an owner API that answers the status of every instance
// with what the test set; it checks only that a token came.
type statusCore struct {
	mu       sync.Mutex
	statuses []ownerapi.InstanceStatus
}

func (c *statusCore) set(st ...ownerapi.InstanceStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.statuses = st
}

func (c *statusCore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != ownerapi.PathStatus || r.Header.Get(ownerapi.HeaderOwnerToken) == "" {
		http.Error(w, `{"error":"not here"}`, http.StatusNotFound)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(c.statuses)
}

// TestStatusAttention runs `openfief status` on the API server with
// Plugins whose status is written as the operator writes it and a stand-in
// core: a failing connector, a view behind, a refused image whose message
// tries to clear the screen and an upgrade waiting for approval, most
// urgent first, each with its command, exit 13; the same as JSON; once all
// is well, exit 0; and a core that does not answer is itself an item. The
// control plane has no platform, so no platform line and no note.
func TestStatusAttention(t *testing.T) {
	const ns = "cli-status"
	k := newKube(t)
	ctx := context.Background()
	if err := k.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testutil.EnsureServiceAccount(t, cs, ns, ownerapi.ServiceAccount)

	conds := func(ready, readyReason, sig, sigReason, sigMessage string) []metav1.Condition {
		at := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
		return []metav1.Condition{
			{Type: v1alpha1.ConditionReady, Status: metav1.ConditionStatus(ready), Reason: readyReason, Message: readyReason, LastTransitionTime: at},
			{Type: v1alpha1.ConditionSignatureVerified, Status: metav1.ConditionStatus(sig), Reason: sigReason, Message: sigMessage, LastTransitionTime: at},
		}
	}
	healthy := conds("True", v1alpha1.ReasonRunning, "True", v1alpha1.ReasonSignedByTrustedSigner, "signed")
	setStatus := func(name string, c []metav1.Condition) {
		t.Helper()
		var p v1alpha1.Plugin
		err := k.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)
		if apierrors.IsNotFound(err) {
			p = *testutil.MakePlugin(name, testutil.Image(name)).Obj()
			p.Namespace = ns
			err = k.c.Create(ctx, &p)
		}
		if err != nil {
			t.Fatal(err)
		}
		p.Status = v1alpha1.PluginStatus{ObservedGeneration: p.Generation, Conditions: c}
		if err := k.c.Status().Update(ctx, &p); err != nil {
			t.Fatal(err)
		}
	}
	setStatus("st-fx", healthy)
	setStatus("st-dav", healthy)
	setStatus("st-refused", conds("False", v1alpha1.ReasonSignatureNotVerified, "False", v1alpha1.ReasonUnsigned, "no signature\x1b[2J\x1b[H verifies"))
	setStatus("st-upgrade", conds("True", v1alpha1.ReasonRunningPreviousVersion, "True", v1alpha1.ReasonVerified, "verified"))

	core := &statusCore{}
	srv := httptest.NewServer(core)
	t.Cleanup(srv.Close)
	now := time.Now().UTC()
	hourAgo, minuteAgo := now.Add(-time.Hour), now.Add(-time.Minute)
	lag := int64(12)
	failing := ownerapi.InstanceStatus{Plugin: "st-fx", Instance: "st-fx", Scheduled: true, IntervalSeconds: 900, LastSync: &minuteAgo, LastError: "flex: token expired\n\x1b]0;owned\x07"}
	behind := ownerapi.InstanceStatus{Plugin: "st-dav", Instance: "st-dav", Scheduled: true, View: true, IntervalSeconds: 3600, LastSync: &hourAgo, LastOK: true, Lag: &lag}
	core.set(failing, behind)

	status := func(args ...string) result {
		t.Helper()
		return openfief(t, k, runOpts{}, append([]string{"-n", ns, "status", "--core-url", srv.URL}, args...)...)
	}
	r := status()
	t.Logf("openfief status:\n%s", r)
	expect(t, r, ExitAttention,
		"SyncFailing", "the last sync of st-fx failed", `flex: token expired \x1b]0;owned\x07`,
		"openfief plugin status st-fx --kubeconfig "+k.kubeconfig+" -n "+ns,
		"view st-dav is behind by 12 entries; the last export ended 60m ago",
		"ImageRefused", `(Unsigned): no signature\x1b[2J\x1b[H verifies`,
		"waits for your approval (RunningPreviousVersion); its previous version runs",
		"openfief plugin approve st-upgrade --kubeconfig "+k.kubeconfig+" -n "+ns)
	if strings.ContainsRune(r.out+r.errOut, 0x1b) || strings.Contains(r.errOut, "Error") || strings.Contains(r.errOut, "Note") {
		t.Errorf("the output holds a raw escape, an error line or a note:\n%s", r)
	}
	var order []string
	for _, line := range strings.Split(strings.TrimSpace(r.out), "\n")[1:] {
		f := strings.Fields(line)
		order = append(order, f[0]+" "+f[1])
	}
	if got, want := strings.Join(order, ", "), "SyncFailing st-fx, ViewBehind st-dav, ImageRefused st-refused, ApprovalPending st-upgrade"; got != want {
		t.Errorf("lines in the order %s, want %s\n%s", got, want, r)
	}

	r = status("-o", "json")
	expect(t, r, ExitAttention)
	var doc struct {
		Items []attention.Item `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.out)
	}
	if len(doc.Items) != 4 || doc.Items[0].Kind != attention.KindSyncFailing || doc.Items[1].Lag == nil || *doc.Items[1].Lag != 12 ||
		doc.Items[3].Command != "openfief plugin approve st-upgrade --kubeconfig "+k.kubeconfig+" -n "+ns {
		t.Errorf("-o json items: %+v", doc.Items)
	}
	for _, field := range []string{`"command"`, `"kind"`, `"message"`, `"plugin"`, `"reason"`, `"since"`, `"lag"`} {
		if !strings.Contains(r.out, field) {
			t.Errorf("-o json lacks the field %s:\n%s", field, r.out)
		}
	}

	// All is well: the connector synced, the view caught up, the refused
	// plugin is gone and the upgrade approved.
	failing.LastOK, failing.LastError = true, ""
	behind.LastSync, behind.Lag = &minuteAgo, new(int64)
	core.set(failing, behind)
	setStatus("st-upgrade", healthy)
	if err := k.c.Delete(ctx, &v1alpha1.Plugin{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "st-refused"}}); err != nil {
		t.Fatal(err)
	}
	expect(t, status(), ExitOK, "Nothing needs your attention.")
	r = status("-o", "json")
	expect(t, r, ExitOK)
	if strings.TrimSpace(r.out) != "{\n    \"items\": []\n}" {
		t.Errorf("-o json with nothing to do: %s", r.out)
	}

	// A core that does not answer.
	r = openfief(t, k, runOpts{}, "-n", ns, "status", "--core-url", "http://127.0.0.1:1")
	expect(t, r, ExitAttention, "CoreUnreachable", "openfief-core did not answer", "openfief platform status --kubeconfig "+k.kubeconfig)
}
