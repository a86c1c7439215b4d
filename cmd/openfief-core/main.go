// Command openfief-core is the plugin-facing half of the OpenFief core
// (OF-8): it calls every running connector's Sync on a schedule and imports
// what it delivers (D-49, D-18), streams an owner's file to a connector's
// ImportFile, verifies the openfief-core tokens plugins present (D-27) and
// enforces data tiers (OF-11). See docs/core.md.
package main

import (
	"context"
	"flag"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/arkadiuss/openfief/internal/core"
	"github.com/arkadiuss/openfief/internal/kubeconfig"
	"github.com/arkadiuss/openfief/internal/memlimit"
)

// intervals is the repeatable --sync-interval-for flag.
type intervals map[string]time.Duration

func (i intervals) String() string {
	parts := make([]string, 0, len(i))
	for k, v := range i {
		parts = append(parts, k+"="+v.String())
	}
	return strings.Join(parts, ",")
}

func (i intervals) Set(s string) error {
	name, d, err := core.ParseInterval(s)
	if err != nil {
		return err
	}
	i[name] = d
	return nil
}

func main() {
	o := core.DefaultOptions()
	o.Scheduler.Intervals = intervals{}
	var kubeconfigPath string
	fs := flag.NewFlagSet("openfief-core", flag.ExitOnError)
	fs.StringVar(&kubeconfigPath, "kubeconfig", "", "kubeconfig file; empty means the in-cluster configuration")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "namespace of the Plugins and of the core's ServiceAccount")
	fs.StringVar(&o.ServiceAccount, "service-account", o.ServiceAccount, "the core's own ServiceAccount, whose TokenRequest tokens call plugins")
	fs.StringVar(&o.DSN, "database", o.DSN, "a SQLite file path, or a postgres:// DSN (PostgreSQL)")
	fs.StringVar(&o.PreMigrationBackupDir, core.FlagPreMigrationBackupDir, "", "directory for the backup the core writes before it migrates a record that holds data (default: beside a SQLite file; PostgreSQL refuses to migrate without it)")
	fs.StringVar(&o.PluginAddr, "plugin-listen", o.PluginAddr, "address plugins call the core on (their openfief-core token required)")
	fs.StringVar(&o.OwnerAddr, "owner-listen", o.OwnerAddr, "address of the owner API (status, imports), reached through the API server's service proxy; every request but /healthz needs the owner's token")
	fs.StringVar(&o.MetricsAddr, "metrics-listen", o.MetricsAddr, "address of the Prometheus metrics (/metrics), served without authentication like the operator's; empty serves none")
	fs.IntVar(&o.PluginPort, "plugin-port", o.PluginPort, "port every plugin's Service serves on (the operator's plugin port)")
	fs.DurationVar(&o.Scheduler.DefaultInterval, "sync-interval", o.Scheduler.DefaultInterval, "how often each connector is synced")
	fs.Var(intervals(o.Scheduler.Intervals), "sync-interval-for", "NAME=DURATION: the sync interval of one instance (repeatable)")
	fs.DurationVar(&o.Views.Interval, "export-interval", core.DefaultExportInterval, "longest a view goes without being sent what is new (imports also start an export at once)")
	fs.Float64Var(&o.Scheduler.Jitter, "sync-jitter", core.DefaultJitter, "largest fraction of the interval added at random")
	fs.IntVar(&o.Scheduler.MaxAttempts, "sync-attempts", core.DefaultMaxAttempts, "calls of one batch at most (retries on Unavailable, DeadlineExceeded and database failures)")
	fs.DurationVar(&o.Scheduler.CallTimeout, "call-timeout", core.DefaultCallTimeout, "bound on one call to a plugin")
	kubeQPS := fs.Float64("kube-api-qps", core.DefaultKubeAPIQPS, "requests per second the core sends to the API server at most (a token for each plugin it calls, reviews of the plugins' tokens)")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", core.DefaultKubeAPIBurst, "requests the core may send to the API server at once above --kube-api-qps")
	fs.DurationVar(&o.TokenCacheTTL, "token-cache-ttl", 0, "how long an accepted plugin token review is reused (0: 1m; never past the token's expiry; negative disables)")
	fs.StringVar(&o.Replica, "replica-name", defaultReplica(), "this replica's name in the leases kept on PostgreSQL (default: $POD_NAME, else the host name)")
	fs.DurationVar(&o.LeaseTTL, "lease-duration", core.DefaultLeaseTTL, "on PostgreSQL, how long a replica's hold on a plugin lasts unrenewed: the longest a plugin waits after its replica died or was cut off")
	fs.DurationVar(&o.LeaseRenew, "lease-renew", core.DefaultLeaseRenew, "on PostgreSQL, how often a replica renews its holds and takes plugins no replica serves")
	fs.StringVar(&o.ReplicaAddress, "replica-address", "", "on PostgreSQL, HOST:PORT where the other replicas reach this one's owner API, to pass it an owner's import of a plugin it serves (default: $POD_IP and the --owner-listen port; none outside a pod)")
	_ = fs.Parse(os.Args[1:])
	o.KubeAPIQPS = float32(*kubeQPS)
	if o.ReplicaAddress == "" {
		o.ReplicaAddress = defaultReplicaAddress(o.OwnerAddr)
	}

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	// A Go soft memory limit under the container's, so the GC works harder
	// before the kernel's OOM killer would stop the process.
	if _, err := memlimit.Set(log); err != nil {
		log.Error("memory limit", "error", err.Error())
	}
	if err := core.CheckInterval(o.Scheduler.DefaultInterval); err != nil {
		log.Error("--sync-interval", "error", err.Error())
		os.Exit(2)
	}
	if err := core.CheckInterval(o.Views.Interval); err != nil {
		log.Error("--export-interval", "error", err.Error())
		os.Exit(2)
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst < 1 {
		log.Error("--kube-api-qps, --kube-api-burst", "error", "both must be positive")
		os.Exit(2)
	}
	if err := core.CheckLeases(o.LeaseTTL, o.LeaseRenew); err != nil {
		log.Error("--lease-duration, --lease-renew", "error", err.Error())
		os.Exit(2)
	}
	o.Log = log
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cfg, err := kubeconfig.ForServer(kubeconfigPath)
	if err == nil {
		err = core.Run(ctx, cfg, o)
	}
	if err != nil {
		log.Error("openfief-core failed", "error", err.Error())
		os.Exit(1)
	}
}

// defaultReplica is the pod's name from the downward API (deploy/core sets
// POD_NAME), else the host name, which is the pod's name in a pod too.
func defaultReplica() string {
	if n := os.Getenv("POD_NAME"); n != "" {
		return n
	}
	n, _ := os.Hostname()
	return n
}

// defaultReplicaAddress is the pod's IP from the downward API (deploy/core
// sets POD_IP) with the owner listener's port, or "" outside a pod.
func defaultReplicaAddress(ownerAddr string) string {
	ip := os.Getenv("POD_IP")
	_, port, err := net.SplitHostPort(ownerAddr)
	if ip == "" || err != nil || port == "" {
		return ""
	}
	return net.JoinHostPort(ip, port)
}
