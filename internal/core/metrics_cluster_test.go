//go:build cluster

package core

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1/viewv1connect"
)

// TestCoreServesMetrics starts the real core against the API server with
// --metrics-listen, a connector behind the SDK and a view, both Plugins
// running as the operator would write them: the metrics port, scraped over
// HTTP, shows the sync and the export, and every openfief_core_ metric the
// alert rules of deploy/monitoring read is among what it serves (the labels'
// bounds are TestMetricsScrapedOverHTTP's: here other tests' Plugins may
// run too).
func TestCoreServesMetrics(t *testing.T) {
	cs, cfg := cluster(t)
	cl := apiClient(t, cfg)
	const fx, view = "metrics-fx", "metrics-view"
	mux := http.NewServeMux()
	mux.Handle(viewv1connect.NewViewServiceHandler(&recordingView{}))
	viewSrv := httptest.NewServer(mux)
	t.Cleanup(viewSrv.Close)
	resolve := urls{fx: servePlugin(t, jwksDir(t, cs), fx, echoConnector{}), view: viewSrv.URL}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c, err := Start(ctx, cfg, Options{
		Store: openStore(t), PluginAddr: "127.0.0.1:0", OwnerAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0",
		Resolve:   func(i string) string { return resolve[i] },
		Scheduler: manualSchedule, Views: ViewOptions{FirstDelay: -1, Settle: -1},
		Log: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	for name, capability := range map[string]plugins.Capability{fx: plugins.CapabilityConnector, view: plugins.CapabilityView} {
		if err := cl.Create(t.Context(), testutil.MakePlugin(name, testutil.Image("fx")).Obj()); err != nil {
			t.Fatal(err)
		}
		setCapability(t, cl, name, capability)
	}
	url := "http://" + c.MetricsAddr()
	fams := eventually(t, url, "the sync and the export", func(f map[string]*dto.MetricFamily) bool {
		synced, _ := value(f, "openfief_core_syncs_total", "plugin="+fx, "reason=succeeded")
		exported, _ := value(f, "openfief_core_exports_total", "plugin="+view, "reason=succeeded")
		lag, seen := value(f, "openfief_core_view_lag_entries", "plugin="+view)
		return synced >= 1 && exported >= 1 && seen && lag == 0
	})
	if rates, _ := value(fams, "openfief_core_stored_rows", "plugin="+fx, "kind=fx_rates"); rates != 2 {
		t.Errorf("stored rates %v, want 2", rates)
	}
	names, err := testutil.RuleMetricNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "openfief_core_") && fams[n] == nil {
			t.Errorf("the rules read %s, which the running core does not serve", n)
		}
	}
}

// setCapability writes the status the operator writes for a Plugin running
// with one capability.
func setCapability(t *testing.T, cl client.Client, name string, capability plugins.Capability) {
	t.Helper()
	var p v1alpha1.Plugin
	if err := cl.Get(t.Context(), client.ObjectKey{Namespace: plugins.Namespace, Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	apimeta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRunning, Message: "runs", ObservedGeneration: p.Generation,
	})
	p.Status.Effective = &v1alpha1.EffectivePermissions{Capabilities: []v1alpha1.Capability{v1alpha1.Capability(capability)}}
	if err := cl.Status().Update(t.Context(), &p); err != nil {
		t.Fatal(err)
	}
}
