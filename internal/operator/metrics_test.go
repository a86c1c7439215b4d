package operator

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// pluginsReader lists fixed Plugins, as the manager's cache would, and
// checks the namespace asked for.
type pluginsReader struct {
	client.Reader
	items []v1alpha1.Plugin
}

func (r pluginsReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	pl, ok := list.(*v1alpha1.PluginList)
	if !ok || o.Namespace != plugins.Namespace {
		return errors.New("only Plugins of openfief are listed")
	}
	pl.Items = r.items
	return nil
}

func pluginWith(name string, conds ...metav1.Condition) v1alpha1.Plugin {
	p := v1alpha1.Plugin{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plugins.Namespace}}
	p.Status.Conditions = conds
	return p
}

func cond(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: "vendor text \x1b[2J PL61109010140000071219812874"}
}

// scrapeOperator serves the collector over HTTP as the manager's endpoint
// does and returns the series of openfief_operator_plugin_condition as
// "plugin/type/status/reason".
func scrapeOperator(t *testing.T, r client.Reader) []string {
	t.Helper()
	fams := scrapeFamilies(t, r)
	var out []string
	for _, m := range fams["openfief_operator_plugin_condition"].GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if m.GetGauge().GetValue() != 1 || len(l) != 4 {
			t.Errorf("series %v = %v, want 1 with four labels", l, m.GetGauge().GetValue())
		}
		out = append(out, l["plugin"]+"/"+l["type"]+"/"+l["status"]+"/"+l["reason"])
	}
	slices.Sort(out)
	return out
}

// scrapeFamilies serves the collector over HTTP and parses the answer.
func scrapeFamilies(t *testing.T, r client.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(&pluginCollector{reader: r})
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d %s", resp.StatusCode, body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// TestPluginConditionMetric: one series per Plugin and condition the
// operator writes, with its status and reason; a reason or status the
// operator never writes is Other or Unknown, another condition type is
// left out, and no message reaches a label.
func TestPluginConditionMetric(t *testing.T) {
	got := scrapeOperator(t, pluginsReader{items: []v1alpha1.Plugin{
		pluginWith("fx",
			cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRunning),
			cond(v1alpha1.ConditionSignatureVerified, metav1.ConditionTrue, v1alpha1.ReasonSignedByTrustedSigner),
			cond(v1alpha1.ConditionApprovalRequired, metav1.ConditionFalse, v1alpha1.ReasonNothingPending)),
		pluginWith("bank",
			cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNoGrant),
			cond(v1alpha1.ConditionApprovalRequired, metav1.ConditionTrue, v1alpha1.ReasonPermissionsPending)),
		pluginWith("evil",
			cond(v1alpha1.ConditionSignatureVerified, metav1.ConditionFalse, v1alpha1.ReasonUnsigned),
			cond(v1alpha1.ConditionReady, "Maybe", "WrittenBySomeoneElse"),
			cond("Injected", metav1.ConditionTrue, "X")),
		pluginWith("new"),
	}})
	want := []string{
		"bank/ApprovalRequired/True/PermissionsPending",
		"bank/Ready/False/NoGrant",
		"evil/Ready/Unknown/Other",
		"evil/SignatureVerified/False/Unsigned",
		"fx/ApprovalRequired/False/NothingPending",
		"fx/Ready/True/Running",
		"fx/SignatureVerified/True/SignedByTrustedSigner",
	}
	if !slices.Equal(got, want) {
		t.Errorf("series:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := scrapeOperator(t, failingReader{}); len(got) != 0 {
		t.Errorf("with the cache not started: %v", got)
	}
}

type failingReader struct{ client.Reader }

func (failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("the cache is not started")
}

// TestRulesUseOnlyOperatorMetrics: every openfief_operator_ metric the
// alert rules of deploy/monitoring read is one the operator exports.
func TestRulesUseOnlyOperatorMetrics(t *testing.T) {
	names, err := testutil.RuleMetricNames()
	if err != nil {
		t.Fatal(err)
	}
	fams := scrapeFamilies(t, pluginsReader{items: []v1alpha1.Plugin{
		pluginWith("fx", cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRunning)),
	}})
	used := 0
	for _, n := range names {
		if !strings.HasPrefix(n, "openfief_operator_") {
			continue
		}
		used++
		if _, ok := fams[n]; !ok {
			t.Errorf("the rules read %s, which the operator does not export", n)
		}
	}
	if used == 0 {
		t.Errorf("the rules read none of the operator's metrics: %v", names)
	}
}

// TestPluginMetricsRegisterAgain: a second manager in one process (the
// tests start several) replaces the first one's collector.
func TestPluginMetricsRegisterAgain(t *testing.T) {
	for range 2 {
		if err := registerPluginMetrics(pluginsReader{}); err != nil {
			t.Fatal(err)
		}
	}
}
