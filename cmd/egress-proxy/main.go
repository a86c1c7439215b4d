// Command egress-proxy is OpenFief's egress proxy: the only way plugin pods
// reach the internet (D-32). It serves HTTP CONNECT for plugins that present
// their openfief-egress token (D-63), to the hosts the operator put on their
// allow-lists in the openfief-egress-allowlist ConfigMap. See
// docs/egress-proxy.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/arkadiuss/openfief/internal/egress"
	"github.com/arkadiuss/openfief/internal/egress/kube"
	"github.com/arkadiuss/openfief/internal/memlimit"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// config is the command's flags.
type config struct {
	listen, metricsListen    string
	namespace, configMap     string
	kubeconfig               string
	dialTimeout, idleTimeout time.Duration
	reviewCacheTTL           time.Duration
	shutdownGrace            time.Duration
	maxPerPlugin, maxTunnels int
	maxPending, maxPendingIP int
	clusterDomain            string
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
	fs.DurationVar(&c.shutdownGrace, "shutdown-grace", egress.DefaultShutdownGrace, "on SIGTERM, how long open tunnels may continue before they are closed")
	fs.IntVar(&c.maxPerPlugin, "max-tunnels-per-plugin", egress.DefaultMaxTunnelsPerPlugin, "open tunnels one plugin may have (429 beyond)")
	fs.IntVar(&c.maxTunnels, "max-tunnels", egress.DefaultMaxTunnels, "open tunnels in total (503 beyond)")
	fs.IntVar(&c.maxPending, "max-pending-conns", egress.DefaultMaxPendingConns, "connections held before they become tunnels, over all clients (closed unread beyond)")
	fs.IntVar(&c.maxPendingIP, "max-pending-per-client", egress.DefaultMaxPendingPerClient, "connections held before they become tunnels, per client IP (closed unread beyond)")
	fs.StringVar(&c.clusterDomain, "cluster-domain", egress.DefaultClusterDomain, "the cluster's DNS domain; CONNECT targets under it are refused")
	_ = fs.Parse(os.Args[1:])

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	// A Go soft memory limit under the container's, so the GC works harder
	// before the kernel's OOM killer would stop the process.
	if _, err := memlimit.Set(log); err != nil {
		log.Error("memory limit", "error", err.Error())
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, c, log); err != nil {
		log.Error("egress proxy failed", "error", err)
		os.Exit(1)
	}
}

// run builds the proxy's Kubernetes adapters from c and serves it with
// egress.Serve until ctx is done, then shuts down.
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

	// The watch outlives ctx, so a host taken off a list during the
	// shutdown grace still closes its tunnels.
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	lists := kube.WatchAllowLists(watchCtx, client, c.namespace, c.configMap, log)
	log.Info("following the allow-list ConfigMap", "configmap", c.namespace+"/"+c.configMap)

	return egress.Serve(ctx, egress.Config{
		Proxy: egress.Options{
			Reviewer:            reviewer,
			AllowLists:          lists,
			Logger:              log,
			Metrics:             metrics,
			DialTimeout:         c.dialTimeout,
			IdleTimeout:         c.idleTimeout,
			MaxTunnelsPerPlugin: c.maxPerPlugin,
			MaxTunnels:          c.maxTunnels,
			ClusterDomain:       c.clusterDomain,
		},
		MaxPendingConns:     c.maxPending,
		MaxPendingPerClient: c.maxPendingIP,
		Addr:                c.listen,
		OpsAddr:             c.metricsListen,
		Ready:               lists.Ready,
		Registry:            reg,
		ShutdownGrace:       c.shutdownGrace,
	})
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
