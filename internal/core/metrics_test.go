package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/testutil"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
	viewv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1/viewv1connect"
)

// brokenText is what the failing plugins answer: plugin-written text that
// must never become a label value.
const brokenText = "expired token for account PL61109010140000071219812874"

// brokenConnector refuses every Sync, as a connector whose credentials
// expired does.
type brokenConnector struct {
	connectorv1connect.UnimplementedConnectorServiceHandler
}

func (brokenConnector) Sync(context.Context, *connect.Request[connectorv1.SyncRequest]) (*connect.Response[connectorv1.SyncResponse], error) {
	return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New(brokenText))
}

// downView answers every page Unavailable.
type downView struct {
	viewv1connect.UnimplementedViewServiceHandler
}

func (downView) Export(context.Context, *connect.Request[viewv1.ExportRequest]) (*connect.Response[viewv1.ExportResponse], error) {
	return nil, connect.NewError(connect.CodeUnavailable, errors.New(brokenText))
}

// metricsHarness is the core's scheduler and views over a real SQLite
// store, calling real Connect servers on loopback through the real Caller,
// with the metrics served over HTTP as the core serves them.
type metricsHarness struct {
	st    *store.Store
	sched *Scheduler
	views *Views
	url   string
}

func newMetricsHarness(t *testing.T) *metricsHarness {
	t.Helper()
	st := openStore(t)
	serve := func(pattern string, h http.Handler) string {
		mux := http.NewServeMux()
		mux.Handle(pattern, h)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	resolve := urls{
		"fx":     serve(connectorv1connect.NewConnectorServiceHandler(echoConnector{})),
		"broken": serve(connectorv1connect.NewConnectorServiceHandler(brokenConnector{})),
		"csv":    serve(viewv1connect.NewViewServiceHandler(&recordingView{})),
		"down":   serve(viewv1connect.NewViewServiceHandler(downView{})),
	}
	log := slog.New(slog.DiscardHandler)
	m := NewMetrics(log)
	caller := &Caller{Tokens: testTokens{}, Resolve: func(i string) string { return resolve[i] }, Metrics: m}
	ctx, cancel := context.WithCancel(context.Background())
	h := &metricsHarness{st: st}
	h.views = NewViews(ctx, ViewOptions{
		Exporter: &Exporter{Store: st, Caller: caller}, Store: st, Interval: time.Hour,
		Settle: -1, FirstDelay: -1, MaxAttempts: 1, Log: log, Metrics: m,
	})
	h.sched = NewScheduler(ctx, SchedulerOptions{
		Store: st, Connector: caller, DefaultInterval: time.Hour, Jitter: -1, FirstSyncDelay: -1,
		MaxAttempts: 1, Log: log, OnStored: h.views.Poke, Metrics: m,
	})
	t.Cleanup(func() {
		cancel()
		h.sched.Wait()
		h.views.Wait()
	})
	if err := m.watchStore(st, h.views); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(metricsHandler(m))
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

// update gives the scheduler and the views the targets, as the Plugin
// watch does.
func (h *metricsHarness) update(ts []Target) {
	h.sched.Update(ts)
	h.views.Update(ts)
}

// scrape GETs /metrics as Prometheus does and parses the answer.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d, %v: %s", resp.StatusCode, err, body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("the answer does not parse: %v", err)
	}
	return fams
}

// value is the value of the series of family name whose labels hold every
// pair of labels ("k=v"), and whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			if have[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// eventually scrapes until ok holds of the answer, for at most 20 s.
func eventually(t *testing.T, url, what string, ok func(map[string]*dto.MetricFamily) bool) map[string]*dto.MetricFamily {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		fams := scrape(t, url)
		if ok(fams) {
			return fams
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for n, f := range fams {
				if strings.HasPrefix(n, "openfief_core_") {
					_, _ = expfmt.MetricFamilyToText(&b, f)
				}
			}
			t.Fatalf("%s: not seen in 20s; the last scrape:\n%s", what, b.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMetricsScrapedOverHTTP: a connector that syncs, one that fails, a
// view that keeps every page and one that is down, all real Connect servers
// called through the core's Caller; the metrics, scraped over HTTP, hold
// each instance's last outcome, its last success, its interval, its count
// by reason, its calls' durations, the rows stored, each view's lag and
// the store's size; an instance that stops running leaves no series.
func TestMetricsScrapedOverHTTP(t *testing.T) {
	h := newMetricsHarness(t)
	before := time.Now()
	h.update([]Target{
		{Instance: "fx", UID: "0000000a-0001", Connector: true},
		{Instance: "broken", UID: "0000000a-0002", Connector: true},
		{Instance: "csv", UID: "0000000a-0003", View: true},
		{Instance: "down", UID: "0000000a-0004", View: true},
	})
	fams := eventually(t, h.url, "both syncs, and an export of the rates", func(f map[string]*dto.MetricFamily) bool {
		ok, _ := value(f, "openfief_core_syncs_total", "plugin=fx", "reason=succeeded")
		failed, _ := value(f, "openfief_core_syncs_total", "plugin=broken", "reason=failed_precondition")
		lag, seen := value(f, "openfief_core_view_lag_entries", "plugin=csv")
		_, down := value(f, "openfief_core_export_failing", "plugin=down")
		return ok >= 1 && failed >= 1 && seen && lag == 0 && down
	})
	checks := []struct {
		name   string
		labels []string
		want   func(float64) bool
		what   string
	}{
		{"openfief_core_sync_failing", []string{"plugin=fx"}, eq(0), "0"},
		{"openfief_core_sync_failing", []string{"plugin=broken"}, eq(1), "1"},
		{"openfief_core_sync_last_success_timestamp_seconds", []string{"plugin=fx"}, func(v float64) bool {
			return v >= float64(before.Unix()) && v <= float64(time.Now().Unix()+1)
		}, "the time of the sync"},
		{"openfief_core_sync_interval_seconds", []string{"plugin=fx"}, eq(3600), "3600"},
		{"openfief_core_syncs_total", []string{"plugin=broken", "reason=succeeded"}, eq(0), "0 (set at start)"},
		{"openfief_core_plugin_call_duration_seconds", []string{"plugin=fx", "method=Sync"}, atLeast(1), "at least one call"},
		{"openfief_core_plugin_call_duration_seconds", []string{"plugin=csv", "method=Export"}, atLeast(1), "at least one call"},
		{"openfief_core_stored_rows", []string{"plugin=fx", "kind=fx_rates"}, atLeast(1), "the rates stored"},
		{"openfief_core_stored_rows", []string{"plugin=fx", "kind=transactions"}, eq(0), "0"},
		{"openfief_core_exports_total", []string{"plugin=csv", "reason=succeeded"}, atLeast(1), "at least one"},
		{"openfief_core_exports_total", []string{"plugin=down", "reason=unavailable"}, atLeast(1), "at least one"},
		{"openfief_core_export_failing", []string{"plugin=csv"}, eq(0), "0"},
		{"openfief_core_export_failing", []string{"plugin=down"}, eq(1), "1"},
		{"openfief_core_export_interval_seconds", []string{"plugin=down"}, eq(3600), "3600"},
		{"openfief_core_store_size_bytes", nil, atLeast(1), "positive"},
	}
	for _, c := range checks {
		got, ok := value(fams, c.name, c.labels...)
		if !ok || !c.want(got) {
			t.Errorf("%s%v = %v (present %v), want %s", c.name, c.labels, got, ok, c.what)
		}
	}
	if _, ok := value(fams, "openfief_core_sync_last_success_timestamp_seconds", "plugin=broken"); ok {
		t.Error("a connector that never synced has a last success")
	}
	rates, _ := value(fams, "openfief_core_stored_rows", "plugin=fx", "kind=fx_rates")
	if lag, _ := value(fams, "openfief_core_view_lag_entries", "plugin=down"); lag != rates {
		t.Errorf("the down view's lag is %v entries, want the %v rates it never kept", lag, rates)
	}
	checkLabels(t, fams)

	// The broken connector and the down view stop running: their series
	// go, but for the rows the store still holds of them (until their
	// Plugins are uninstalled); the others stay.
	h.update([]Target{{Instance: "fx", UID: "0000000a-0001", Connector: true}, {Instance: "csv", UID: "0000000a-0003", View: true}})
	fams = scrape(t, h.url)
	for _, f := range fams {
		if f.GetName() == "openfief_core_stored_rows" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "plugin" && (l.GetValue() == "broken" || l.GetValue() == "down") {
					t.Errorf("%s still has a series of %s, which stopped", f.GetName(), l.GetValue())
				}
			}
		}
	}
	if _, ok := value(fams, "openfief_core_sync_failing", "plugin=fx"); !ok {
		t.Error("fx's series went with the others")
	}
}

func eq(want float64) func(float64) bool      { return func(v float64) bool { return v == want } }
func atLeast(want float64) func(float64) bool { return func(v float64) bool { return v >= want } }

// labelValues are every value each label of the core's metrics may take
// in TestMetricsScrapedOverHTTP: the instances' names and fixed sets.
func labelValues() map[string][]string {
	var reasons []string
	for c := connect.Code(1); c <= connect.CodeUnauthenticated; c++ {
		reasons = append(reasons, c.String())
	}
	reasons = append(reasons, ReasonSucceeded, ReasonOutsideTiers, ReasonBatchMismatch, ReasonInvalidDelivery,
		ReasonAnswerTooLarge, ReasonRedirectRefused, ReasonCompressedAnswer, ReasonGrantChanged, ReasonStore)
	return map[string][]string{
		"plugin": {"fx", "broken", "csv", "down"},
		"reason": reasons,
		"method": {methodSync, methodImportFile, methodExport},
		"kind":   {rowBatches, rowTransactions, rowPostings, rowBalances, rowPrices, rowFxRates, rowIndexReadings, rowProblems},
	}
}

// checkLabels fails on any label of the core's own metrics outside
// labelValues, and on any value holding what a plugin answered.
func checkLabels(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	allowed := labelValues()
	for name, f := range fams {
		if !strings.HasPrefix(name, "openfief_core_") {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				vals, ok := allowed[l.GetName()]
				switch {
				case !ok:
					t.Errorf("%s has a label %q outside the fixed set", name, l.GetName())
				case !slices.Contains(vals, l.GetValue()):
					t.Errorf("%s{%s=%q}: a value outside the instances' names and the fixed set", name, l.GetName(), l.GetValue())
				case strings.Contains(l.GetValue(), "PL61"):
					t.Errorf("%s{%s=%q} holds what a plugin answered", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// TestReasonIsAFixedSet: every failure maps to a constant or a Connect
// code, never to the error's text.
func TestReasonIsAFixedSet(t *testing.T) {
	for want, err := range map[string]error{
		ReasonSucceeded:        nil,
		ReasonOutsideTiers:     fmt.Errorf("x: %w", ErrOutsideTiers),
		ReasonBatchMismatch:    fmt.Errorf("%w: sent a, got b", ErrBatchMismatch),
		ReasonInvalidDelivery:  fmt.Errorf("storing: %w", &store.ValidationError{}),
		ReasonAnswerTooLarge:   fmt.Errorf("%w: big", ErrAnswerTooLarge),
		ReasonRedirectRefused:  ErrRedirectRefused,
		ReasonCompressedAnswer: ErrCompressedAnswer,
		ReasonGrantChanged:     fmt.Errorf("after 2 attempts: %w", ErrGrantChanged),
		ReasonStore:            storeError{errors.New("database is locked")},
		"unavailable":          fmt.Errorf("calling Sync: %w", connect.NewError(connect.CodeUnavailable, errors.New(brokenText))),
		"permission_denied":    connect.NewError(connect.CodePermissionDenied, errors.New(brokenText)),
		"deadline_exceeded":    fmt.Errorf("calling Sync: %w", context.DeadlineExceeded),
		"unknown":              errors.New(brokenText),
	} {
		if got := Reason(err); got != want {
			t.Errorf("Reason(%v) = %q, want %q", err, got, want)
		}
	}
}

// TestRulesUseOnlyExportedMetrics: every openfief_core_ metric the alert
// rules of deploy/monitoring read is one the core exports (scraped as in
// TestMetricsScrapedOverHTTP), so no alert waits on a series that never
// comes.
func TestRulesUseOnlyExportedMetrics(t *testing.T) {
	names, err := testutil.RuleMetricNames()
	if err != nil {
		t.Fatal(err)
	}
	h := newMetricsHarness(t)
	h.update([]Target{{Instance: "fx", UID: "0000000a-0001", Connector: true}, {Instance: "csv", UID: "0000000a-0003", View: true}})
	fams := eventually(t, h.url, "a sync and an export", func(f map[string]*dto.MetricFamily) bool {
		ok, _ := value(f, "openfief_core_syncs_total", "plugin=fx", "reason=succeeded")
		exp, _ := value(f, "openfief_core_exports_total", "plugin=csv", "reason=succeeded")
		return ok >= 1 && exp >= 1
	})
	used := 0
	for _, n := range names {
		if !strings.HasPrefix(n, "openfief_core_") {
			continue
		}
		used++
		if _, ok := fams[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")]; !ok {
			t.Errorf("the rules read %s, which the core does not export", n)
		}
	}
	if used == 0 {
		t.Errorf("the rules read none of the core's metrics: %v", names)
	}
}

// TestMetricsServeTheRestWhenTheStoreFails: with the database gone, a
// scrape still answers with what the core holds in memory (the outcomes,
// the calls), leaving out what it reads from the database (the SQLite
// file's size is still read from the file).
func TestMetricsServeTheRestWhenTheStoreFails(t *testing.T) {
	h := newMetricsHarness(t)
	h.update([]Target{{Instance: "fx", UID: "0000000a-0001", Connector: true}})
	eventually(t, h.url, "a sync", func(f map[string]*dto.MetricFamily) bool {
		ok, _ := value(f, "openfief_core_syncs_total", "plugin=fx", "reason=succeeded")
		return ok >= 1
	})
	if err := h.st.Close(); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, h.url)
	if _, ok := value(fams, "openfief_core_sync_interval_seconds", "plugin=fx"); !ok {
		t.Error("the series held in memory are gone with the store")
	}
	if _, ok := fams["openfief_core_stored_rows"]; ok {
		t.Error("rows served from a closed store")
	}
}
