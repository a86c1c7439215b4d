// Command egress-proxy is OpenFief's egress proxy: the only way plugin pods
// reach the internet (D-32). It serves HTTP CONNECT for plugins that present
// their openfief-egress token (D-63), to the hosts the operator put on their
// allow-lists in the openfief-egress-allowlist ConfigMap. It parses its
// flags into proxyserver.Options and runs proxyserver.Run, which
// `openfief dev` runs too. See docs/egress-proxy.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/egress/proxyserver"
	"github.com/arkadiuss/openfief/internal/kubeconfig"
	"github.com/arkadiuss/openfief/internal/memlimit"
)

func main() {
	o, kubeconfigPath := parseFlags(os.Args[1:])
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	// A Go soft memory limit under the container's, so the GC works harder
	// before the kernel's OOM killer would stop the process.
	if _, err := memlimit.Set(log); err != nil {
		log.Error("memory limit", "error", err.Error())
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	o.Log = log
	if err := run(ctx, kubeconfigPath, o); err != nil {
		log.Error("egress proxy failed", "error", err)
		os.Exit(1)
	}
}

// parseFlags reads the command's flags into proxyserver.Options, starting
// from its defaults, and returns them with the --kubeconfig path.
func parseFlags(args []string) (proxyserver.Options, string) {
	o := proxyserver.DefaultOptions()
	var kubeconfigPath string
	fs := flag.NewFlagSet("egress-proxy", flag.ExitOnError)
	fs.StringVar(&o.Listen, "listen", o.Listen, "address the proxy serves CONNECT on")
	fs.StringVar(&o.MetricsListen, "metrics-listen", o.MetricsListen, "address of /healthz, /readyz and /metrics")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "namespace of the allow-list ConfigMap")
	fs.StringVar(&o.AllowListConfigMap, "allowlist-configmap", o.AllowListConfigMap, "name of the allow-list ConfigMap")
	fs.StringVar(&kubeconfigPath, "kubeconfig", "", "kubeconfig file; empty means the in-cluster configuration")
	fs.DurationVar(&o.DialTimeout, "dial-timeout", o.DialTimeout, "bound on resolving a host and on each connection attempt")
	fs.DurationVar(&o.IdleTimeout, "idle-timeout", o.IdleTimeout, "close a tunnel after this long without traffic")
	fs.DurationVar(&o.ReviewCacheTTL, "review-cache-ttl", o.ReviewCacheTTL, "how long an accepted token review is cached (at most 5m, never past the token's expiry; 0 disables)")
	fs.DurationVar(&o.ShutdownGrace, "shutdown-grace", o.ShutdownGrace, "on SIGTERM, how long open tunnels may continue before they are closed")
	fs.IntVar(&o.MaxTunnelsPerPlugin, "max-tunnels-per-plugin", o.MaxTunnelsPerPlugin, "open tunnels one plugin may have (429 beyond)")
	fs.IntVar(&o.MaxTunnels, "max-tunnels", o.MaxTunnels, "open tunnels in total (503 beyond)")
	fs.IntVar(&o.MaxPendingConns, "max-pending-conns", o.MaxPendingConns, "connections held before they become tunnels, over all clients (closed unread beyond)")
	fs.IntVar(&o.MaxPendingPerClient, "max-pending-per-client", o.MaxPendingPerClient, "connections held before they become tunnels, per client IP (closed unread beyond)")
	fs.StringVar(&o.ClusterDomain, "cluster-domain", o.ClusterDomain, "the cluster's DNS domain; CONNECT targets under it are refused")
	_ = fs.Parse(args)
	return o, kubeconfigPath
}

// run checks o's settings, connects to the API server with the kubeconfig
// at path (in-cluster when empty) and runs the proxy o describes until ctx
// is done.
func run(ctx context.Context, path string, o proxyserver.Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	cfg, err := kubeconfig.ForServer(path)
	if err != nil {
		return err
	}
	if o.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	return proxyserver.Run(ctx, o)
}
