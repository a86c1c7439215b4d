// Command operator runs OpenFief's plugin operator (D-10, D-13): it turns
// Plugin and PluginGrant resources in the openfief namespace into locked-down
// workloads, deploying only images a trusted signer signed (D-57).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/memlimit"
	"github.com/arkadiuss/openfief/internal/operator"
	"github.com/arkadiuss/openfief/internal/plugins"
)

func main() {
	o := operator.DefaultOptions()
	var (
		qps         float64
		burst       int
		gateTargets = plugins.DefaultGateTargets
	)
	flag.StringVar(&o.Cluster.CoreService, "core-service", o.Cluster.CoreService, "name of the core's Service in openfief")
	flag.StringVar(&o.Cluster.CorePort, "core-port", o.Cluster.CorePort, "name of the core Service's port plugins call")
	flag.StringVar(&o.Cluster.ProxyService, "proxy-service", o.Cluster.ProxyService, "name of the egress proxy's Service in openfief")
	flag.StringVar(&o.Cluster.ProxyPort, "proxy-port", o.Cluster.ProxyPort, "name of the egress proxy Service's port")
	flag.StringVar(&o.Cluster.CoreSubject, "core-service-account", o.Cluster.CoreSubject, "username of the core's ServiceAccount, which plugins accept calls from")
	flag.IntVar(&o.Cluster.PluginPort, "plugin-port", o.Cluster.PluginPort, "port plugins listen on")
	flag.StringVar(&o.TrustedSignersFile, "trusted-signers", o.TrustedSignersFile, "a fixed owner's signers.json read once at start (missing adds no signer, invalid refuses to start); empty follows the ConfigMap openfief-trusted-signers live")
	flag.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "address of the metrics endpoint; 0 turns it off")
	flag.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "address of /healthz and /readyz")
	flag.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection, "elect a leader so only one replica acts")
	flag.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", o.LeaseDuration, "how long a leader's Lease holds without renewal: a standby takes over at most this long after the leader dies")
	flag.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", o.RenewDeadline, "how long the leader keeps trying to renew before it stops acting (and exits); below the lease duration")
	flag.DurationVar(&o.RetryPeriod, "leader-election-retry-period", o.RetryPeriod, "how often replicas try to acquire or renew the Lease")
	flag.Var((*multiFlag)(&o.InsecureRegistries), "insecure-registry", "registry host[:port] read over plain HTTP (repeatable; loopback registries always are)")
	flag.StringVar(&o.RegistryConfigFile, "registry-config", o.RegistryConfigFile, "docker config.json with registry credentials, re-read when it changes (default: read registries anonymously)")
	flag.DurationVar(&o.TokenKeysRefresh, "signing-keys-refresh", o.TokenKeysRefresh, "how often the ServiceAccount signing keys are re-published to openfief-sa-jwks")
	flag.DurationVar(&o.RegistryTimeout, "registry-timeout", o.RegistryTimeout, "time limit of one image verification's registry reads")
	flag.DurationVar(&o.RegistryRetry, "registry-retry", o.RegistryRetry, "how soon a plugin whose image's registry could not be read (unreachable, or refusing the read) is checked again")
	flag.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", o.MaxConcurrentReconciles, "how many Plugins reconcile at once, so a slow one never holds up another's revocation")
	flag.DurationVar(&o.ReconcileTimeout, "reconcile-timeout", o.ReconcileTimeout, "time limit of one Plugin's reconcile")
	flag.StringVar(&o.Cluster.Gate.Image, "isolation-gate-image", o.Cluster.Gate.Image, "the release's check probe image by digest, run as every plugin pod's isolation gate (required unless --isolation-gate=false)")
	flag.BoolFunc("isolation-gate", "true (default) starts every plugin only once its pod's network isolation is in force; false runs plugins without the gate (unsafe: a plugin's first moments are unfiltered)", func(v string) error {
		on, err := strconv.ParseBool(v)
		o.Cluster.Gate.Disabled = !on
		return err
	})
	flag.StringVar(&gateTargets, "isolation-gate-targets", gateTargets, "what the isolation gate must find blocked, comma-separated: cluster-dns, api-server, node-dns, or tcp=IP:PORT")
	flag.DurationVar(&o.Cluster.Gate.Settings.AttemptTimeout, "isolation-gate-timeout", o.Cluster.Gate.Settings.AttemptTimeout, "how long one isolation gate attempt waits for an answer before it counts as blocked")
	flag.DurationVar(&o.Cluster.Gate.Settings.Deadline, "isolation-gate-deadline", o.Cluster.Gate.Settings.Deadline, "how long the isolation gate waits for isolation before it fails the pod")
	flag.Float64Var(&qps, "kube-api-qps", operator.DefaultKubeAPIQPS, "requests per second the operator sends to the API server at most")
	flag.IntVar(&burst, "kube-api-burst", operator.DefaultKubeAPIBurst, "burst above --kube-api-qps")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	targets, err := plugins.ParseGateTargets(gateTargets)
	if err != nil {
		fmt.Fprintln(os.Stderr, "operator: --isolation-gate-targets:", err)
		os.Exit(2)
	}
	o.Cluster.Gate.Settings.Targets = targets
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	// A Go soft memory limit under the container's, so the GC works harder
	// before the kernel's OOM killer would stop the process.
	if _, err := memlimit.Set(slog.New(logr.ToSlogHandler(ctrl.Log.WithName("memlimit")))); err != nil {
		fmt.Fprintln(os.Stderr, "operator: memory limit:", err)
	}

	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(qps), burst
	if err := run(ctrl.SetupSignalHandler(), cfg, o); err != nil {
		fmt.Fprintln(os.Stderr, "operator:", err)
		os.Exit(1)
	}
}

// run builds the operator o describes on the API server cfg connects to and
// runs it until ctx is done.
func run(ctx context.Context, cfg *rest.Config, o operator.Options) error {
	scheme, err := apiconv.NewScheme()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, o.ManagerOptions(scheme))
	if err != nil {
		return err
	}
	if _, err := operator.AddToManager(mgr, o); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return fmt.Sprint([]string(*m)) }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
