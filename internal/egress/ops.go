package egress

import (
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// opsHandler serves the proxy's operations endpoints: /healthz is 200 while
// the process runs; /readyz is 200 only while cfg.Ready holds and stopping
// is false, and 503 with the reason otherwise; /metrics serves cfg.Registry
// when there is one.
func opsHandler(cfg Config, stopping *atomic.Bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		ready, reason := true, ""
		if cfg.Ready != nil {
			ready, reason = cfg.Ready()
		}
		if stopping.Load() {
			ready, reason = false, "shutting down"
		}
		if !ready {
			http.Error(w, "not ready: "+reason, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	if cfg.Registry != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{Registry: cfg.Registry}))
	}
	return mux
}
