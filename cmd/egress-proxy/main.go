// Command egress-proxy is OpenFief's egress proxy: the only way plugin pods
// reach the internet (D-32). It serves HTTP CONNECT for plugins that present
// their openfief-egress token (D-63), to the hosts the operator put on their
// allow-lists in the openfief-egress-allowlist ConfigMap. See
// docs/egress-proxy.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/arkadiuss/openfief/internal/egress"
	"github.com/arkadiuss/openfief/internal/egress/kube"
	"github.com/arkadiuss/openfief/internal/plugins"
)

type config struct {
	listen, metricsListen    string
	namespace, configMap     string
	kubeconfig               string
	dialTimeout, idleTimeout time.Duration
	reviewCacheTTL           time.Duration
	shutdownGrace            time.Duration
	maxPerPlugin, maxTunnels int
}

func main() {
	var c config
	fs := flag.NewFlagSet("egress-proxy", flag.ExitOnError)
	fs.StringVar(&c.listen, "listen", ":3128", "address the proxy serves CONNECT on")
	fs.StringVar(&c.metricsListen, "metrics-listen", ":9090", "address of /healthz, /readyz and /metrics")
	fs.StringVar(&c.namespace, "namespace", plugins.Namespace, "namespace of the allow-list ConfigMap")
	fs.StringVar(&c.configMap, "allowlist-configmap", plugins.AllowListConfigMap, "name of the allow-list ConfigMap")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file; empty means the in-cluster configuration")
	fs.DurationVar(&c.dialTimeout, "dial-timeout", egress.DefaultDialTimeout, "bound on resolving a host and on each connection attempt")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", egress.DefaultIdleTimeout, "close a tunnel after this long without traffic")
	fs.DurationVar(&c.reviewCacheTTL, "review-cache-ttl", egress.MaxReviewCacheTTL, "how long an accepted token review is cached (at most 5m, never past the token's expiry; 0 disables)")
	fs.DurationVar(&c.shutdownGrace, "shutdown-grace", 20*time.Second, "on SIGTERM, how long open tunnels may continue before they are closed")
	fs.IntVar(&c.maxPerPlugin, "max-tunnels-per-plugin", egress.DefaultMaxTunnelsPerPlugin, "open tunnels one plugin may have (429 beyond)")
	fs.IntVar(&c.maxTunnels, "max-tunnels", egress.DefaultMaxTunnels, "open tunnels in total (503 beyond)")
	_ = fs.Parse(os.Args[1:])

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, c, log); err != nil {
		log.Error("egress proxy failed", "error", err)
		os.Exit(1)
	}
}

// run wires the proxy and serves until ctx is done, then shuts down.
func run(ctx context.Context, c config, log *slog.Logger) error {
	if c.reviewCacheTTL > egress.MaxReviewCacheTTL {
		return fmt.Errorf("--review-cache-ttl %v is longer than %v", c.reviewCacheTTL, egress.MaxReviewCacheTTL)
	}
	restConfig, err := restConfig(c.kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, err := egress.NewMetrics(reg)
	if err != nil {
		return err
	}
	inner, err := kube.NewTokenReviewer(client.AuthenticationV1(), plugins.AudienceEgress)
	if err != nil {
		return err
	}
	reviewer := egress.NewCachingTokenReviewer(inner, egress.WithCacheTTL(c.reviewCacheTTL), egress.WithReviewMetrics(metrics))

	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	lists := kube.WatchAllowLists(watchCtx, client, c.namespace, c.configMap, log)

	proxy, err := egress.New(egress.Options{
		Reviewer:            reviewer,
		AllowLists:          lists,
		Logger:              log,
		Metrics:             metrics,
		DialTimeout:         c.dialTimeout,
		IdleTimeout:         c.idleTimeout,
		MaxTunnelsPerPlugin: c.maxPerPlugin,
		MaxTunnels:          c.maxTunnels,
	})
	if err != nil {
		return err
	}

	var stopping atomic.Bool
	ops := http.NewServeMux()
	ops.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	ops.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		ready, reason := lists.Ready()
		if stopping.Load() {
			ready, reason = false, "shutting down"
		}
		if !ready {
			http.Error(w, "not ready: "+reason, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	ops.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))

	proxySrv := &http.Server{
		Addr:              c.listen,
		Handler:           proxy,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	opsSrv := &http.Server{Addr: c.metricsListen, Handler: ops, ReadHeaderTimeout: 10 * time.Second}

	errc := make(chan error, 2)
	for _, s := range []*http.Server{proxySrv, opsSrv} {
		go func() {
			if err := s.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("serving %s: %w", s.Addr, err)
			}
		}()
	}
	log.Info("egress proxy serving", "listen", c.listen, "metrics", c.metricsListen,
		"configmap", c.namespace+"/"+c.configMap)

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "grace", c.shutdownGrace)
	case runErr = <-errc:
	}
	stopping.Store(true)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), c.shutdownGrace)
	defer cancel()
	_ = proxySrv.Shutdown(shutdownCtx) // stops accepting; tunnels are hijacked
	if err := proxy.Shutdown(shutdownCtx); err != nil {
		log.Info("closed the tunnels still open at the end of the grace period")
	}
	_ = opsSrv.Shutdown(shutdownCtx)
	return runErr
}

// restConfig loads a kubeconfig file, or the in-cluster configuration when
// path is empty.
func restConfig(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration (use --kubeconfig outside a cluster): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}
