package core

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/arkadiuss/openfief/internal/core/store"
)

// Metrics are the core's Prometheus metrics, served on a port of their own
// (--metrics-listen; docs/operations.md#metrics lists each one). Their
// labels hold instance names (the label plugin: Prometheus keeps the label
// instance for the scraped target), the fixed
// reasons of Reason, call methods and entry kinds: never anything a plugin
// delivered or answered. A nil *Metrics records nothing.
type Metrics struct {
	reg *prometheus.Registry
	// sync and export are the per-instance series of connectors' syncs
	// and views' exports.
	sync, export *runMetrics
	calls        *prometheus.HistogramVec
	log          *slog.Logger
}

// runMetrics are the series of one kind of run, by instance.
type runMetrics struct {
	total       *prometheus.CounterVec
	lastSuccess *prometheus.GaugeVec
	failing     *prometheus.GaugeVec
	interval    *prometheus.GaugeVec
	// methods are the calls of this kind of run, whose durations go with
	// an instance that stops.
	methods []string
	calls   *prometheus.HistogramVec
}

// Reasons of a run's outcome (the reason label). ReasonSucceeded is a
// success; the others name what failed: one of the core's own refusals,
// the database, or the Connect code the plugin's call ended with (in
// Connect's spelling: "unavailable", "invalid_argument", ...).
const (
	ReasonSucceeded        = "succeeded"
	ReasonOutsideTiers     = "outside_tiers"
	ReasonBatchMismatch    = "batch_mismatch"
	ReasonInvalidDelivery  = "invalid_delivery"
	ReasonAnswerTooLarge   = "answer_too_large"
	ReasonRedirectRefused  = "redirect_refused"
	ReasonCompressedAnswer = "compressed_answer"
	ReasonGrantChanged     = "grant_changed"
	ReasonStore            = "store"
)

// Reason is the reason label of a run that ended with err: ReasonSucceeded
// for nil, a constant above for the core's refusals and the database, and
// otherwise the Connect code of err (unknown for an error without one).
func Reason(err error) string {
	var se storeError
	switch {
	case err == nil:
		return ReasonSucceeded
	case errors.Is(err, ErrOutsideTiers):
		return ReasonOutsideTiers
	case errors.Is(err, ErrBatchMismatch):
		return ReasonBatchMismatch
	case isInvalidDelivery(err):
		return ReasonInvalidDelivery
	case errors.Is(err, ErrAnswerTooLarge):
		return ReasonAnswerTooLarge
	case errors.Is(err, ErrRedirectRefused):
		return ReasonRedirectRefused
	case errors.Is(err, ErrCompressedAnswer):
		return ReasonCompressedAnswer
	case errors.Is(err, ErrGrantChanged):
		return ReasonGrantChanged
	case errors.As(err, &se):
		return ReasonStore
	case errors.Is(err, context.DeadlineExceeded):
		return connect.CodeDeadlineExceeded.String()
	}
	return connect.CodeOf(err).String()
}

// Call methods (the method label of the call durations).
const (
	methodSync       = "Sync"
	methodImportFile = "ImportFile"
	methodExport     = "Export"
)

// NewMetrics returns the core's metrics in a registry of their own, with the
// Go runtime's and the process's.
func NewMetrics(log *slog.Logger) *Metrics {
	if log == nil {
		log = slog.Default()
	}
	reg := prometheus.NewRegistry()
	calls := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "openfief_core_plugin_call_duration_seconds",
		Help: "Duration of the core's calls to plugins (Sync, ImportFile, Export of one page), answered or not.",
		// Up to the default call timeout, two minutes.
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"plugin", "method"})
	m := &Metrics{
		reg: reg, calls: calls, log: log,
		sync:   newRunMetrics("sync", "syncs", "connector", calls, methodSync, methodImportFile),
		export: newRunMetrics("export", "exports", "view", calls, methodExport),
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), calls)
	for _, r := range []*runMetrics{m.sync, m.export} {
		reg.MustRegister(r.total, r.lastSuccess, r.failing, r.interval)
	}
	return m
}

func newRunMetrics(run, runs, who string, calls *prometheus.HistogramVec, methods ...string) *runMetrics {
	return &runMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "openfief_core_" + runs + "_total",
			Help: "Scheduled " + runs + " of each " + who + " that ended, by reason (succeeded or what failed), retries included in one.",
		}, []string{"plugin", "reason"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "openfief_core_" + run + "_last_success_timestamp_seconds",
			Help: "When the " + who + "'s last successful " + run + " ended (Unix time); absent until one is known.",
		}, []string{"plugin"}),
		failing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "openfief_core_" + run + "_failing",
			Help: "1 when the " + who + "'s last " + run + " failed, 0 when it succeeded.",
		}, []string{"plugin"}),
		interval: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "openfief_core_" + run + "_interval_seconds",
			Help: "The longest the core waits between two " + runs + " of the " + who + ".",
		}, []string{"plugin"}),
		methods: methods,
		calls:   calls,
	}
}

// start sets the series of an instance whose worker starts: its interval,
// a zero count of successes, and what the store recorded of its last run
// (rec; known false when it has none).
func (r *runMetrics) start(instance string, interval time.Duration, rec store.InstanceRecord, known bool) {
	if r == nil {
		return
	}
	r.interval.WithLabelValues(instance).Set(interval.Seconds())
	r.total.WithLabelValues(instance, ReasonSucceeded).Add(0)
	if !known || rec.LastSync.IsZero() {
		return
	}
	r.setOutcome(instance, rec.LastOK, rec.LastSync)
}

// done records a run of instance that ended at with err.
func (r *runMetrics) done(instance string, err error, at time.Time) {
	if r == nil {
		return
	}
	r.total.WithLabelValues(instance, Reason(err)).Inc()
	r.setOutcome(instance, err == nil, at)
}

func (r *runMetrics) setOutcome(instance string, ok bool, at time.Time) {
	if ok {
		r.failing.WithLabelValues(instance).Set(0)
		r.lastSuccess.WithLabelValues(instance).Set(float64(at.UnixNano()) / 1e9)
		return
	}
	r.failing.WithLabelValues(instance).Set(1)
}

// stop drops every series of an instance whose worker stopped, so that the
// labels hold only the instances the core runs now.
func (r *runMetrics) stop(instance string) {
	if r == nil {
		return
	}
	for _, v := range []*prometheus.MetricVec{r.total.MetricVec, r.lastSuccess.MetricVec, r.failing.MetricVec, r.interval.MetricVec} {
		v.DeletePartialMatch(prometheus.Labels{"plugin": instance})
	}
	for _, m := range r.methods {
		r.calls.DeleteLabelValues(instance, m)
	}
}

// syncs and exports are m's run series, nil for a nil m.
func (m *Metrics) syncs() *runMetrics {
	if m == nil {
		return nil
	}
	return m.sync
}

func (m *Metrics) exports() *runMetrics {
	if m == nil {
		return nil
	}
	return m.export
}

// observeCall records the duration of a call to instance's method that
// began at start.
func (m *Metrics) observeCall(instance, method string, start time.Time) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(instance, method).Observe(time.Since(start).Seconds())
}

// Handler serves the metrics in Prometheus' text and protobuf formats. A
// part that cannot be read (the database down) is left out of the answer
// and logged; the rest is served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            m.reg,
		Timeout:             scrapeTimeout,
		MaxRequestsInFlight: 2,
	})
}

// scrapeTimeout bounds one scrape, the store's reads included.
const scrapeTimeout = 20 * time.Second

// metricsHandler serves GET /metrics on the metrics port, and nothing else.
func metricsHandler(m *Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	return mux
}
