package egress

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the proxy's Prometheus metrics. Labels take values from fixed
// sets only (decisions, reasons, directions), never from a request, so a
// client cannot grow them.
type Metrics struct {
	decisions   *prometheus.CounterVec
	bytes       *prometheus.CounterVec
	open        prometheus.Gauge
	closes      *prometheus.CounterVec
	duration    prometheus.Histogram
	reviewCache *prometheus.CounterVec
	reviews     *prometheus.CounterVec
}

// NewMetrics creates the proxy's metrics and registers them with reg. A nil
// reg leaves them unregistered, which tests and callers without metrics use.
// No global registry is touched.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "openfief_egress_decisions_total",
			Help: "CONNECT requests by decision (allow, deny) and reason.",
		}, []string{"decision", "reason"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "openfief_egress_tunnel_bytes_total",
			Help: "Bytes carried through tunnels, by direction (up: plugin to host, down: host to plugin).",
		}, []string{"direction"}),
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "openfief_egress_open_tunnels",
			Help: "Tunnels currently open.",
		}),
		closes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "openfief_egress_tunnel_closes_total",
			Help: "Tunnels closed, by reason (closed, idle_timeout, revoked, shutdown, error).",
		}, []string{"reason"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "openfief_egress_tunnel_duration_seconds",
			Help:    "How long tunnels stayed open.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
		}),
		reviewCache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "openfief_egress_token_review_cache_total",
			Help: "Token review cache lookups, by result (hit, miss).",
		}, []string{"result"}),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "openfief_egress_token_reviews_total",
			Help: "Token reviews, by result: sent to the API server (accepted, refused, error), or not sent (malformed: no JWT with a future exp; capacity: too many in flight).",
		}, []string{"result"}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.decisions, m.bytes, m.open, m.closes, m.duration, m.reviewCache, m.reviews} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}

func (m *Metrics) decision(decision, reason string) {
	m.decisions.WithLabelValues(decision, reason).Inc()
}
