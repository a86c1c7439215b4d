// Command operator runs OpenFief's plugin operator (D-10, D-13): it turns
// Plugin and PluginGrant resources in the openfief namespace into locked-down
// workloads, deploying only images a trusted signer signed (D-57).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/operator"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

func main() {
	var (
		cc              operator.ClusterConfig
		signersFile     string
		metricsAddr     string
		probeAddr       string
		leaderElect     bool
		insecureRegs    multiFlag
		signingRefresh  time.Duration
		registryTimeout time.Duration
		qps             float64
		burst           int
	)
	flag.StringVar(&cc.CoreService, "core-service", operator.DefaultCoreService, "name of the core's Service in openfief")
	flag.StringVar(&cc.CorePort, "core-port", operator.DefaultCorePort, "name of the core Service's port plugins call")
	flag.StringVar(&cc.ProxyService, "proxy-service", operator.DefaultProxyService, "name of the egress proxy's Service in openfief")
	flag.StringVar(&cc.ProxyPort, "proxy-port", operator.DefaultProxyPort, "name of the egress proxy Service's port")
	flag.StringVar(&cc.CoreSubject, "core-service-account", plugins.DefaultCoreSubject, "username of the core's ServiceAccount, which plugins accept calls from (D-59)")
	flag.IntVar(&cc.PluginPort, "plugin-port", plugins.DefaultPluginPort, "port plugins listen on")
	flag.StringVar(&signersFile, "trusted-signers", trust.DefaultSignersFile, "owner's signers.json; missing adds no signer, invalid refuses to start (D-45)")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the metrics endpoint; 0 turns it off")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.BoolVar(&leaderElect, "leader-elect", true, "elect a leader so only one replica acts")
	flag.Var(&insecureRegs, "insecure-registry", "registry host[:port] read over plain HTTP (repeatable; loopback registries always are)")
	flag.DurationVar(&signingRefresh, "signing-keys-refresh", 10*time.Minute, "how often the ServiceAccount signing keys are re-published to openfief-sa-jwks")
	flag.DurationVar(&registryTimeout, "registry-timeout", 30*time.Second, "time limit of one image verification's registry reads")
	flag.Float64Var(&qps, "kube-api-qps", 50, "requests per second the operator sends to the API server at most")
	flag.IntVar(&burst, "kube-api-burst", 100, "burst above --kube-api-qps")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(qps), burst
	if err := run(cfg, cc, signersFile, metricsAddr, probeAddr, leaderElect, insecureRegs, signingRefresh, registryTimeout); err != nil {
		fmt.Fprintln(os.Stderr, "operator:", err)
		os.Exit(1)
	}
}

func run(cfg *rest.Config, cc operator.ClusterConfig, signersFile, metricsAddr, probeAddr string, leaderElect bool,
	insecure []string, signingRefresh, registryTimeout time.Duration) error {
	policy, err := trust.LoadPolicy(signersFile)
	if err != nil {
		return err
	}
	images, err := cosign.NewVerifier(cosign.WithPublicKeys(policy.PublicKeys()),
		cosign.WithInsecureRegistries(insecure...), cosign.WithTimeout(registryTimeout))
	if err != nil {
		return err
	}
	scheme, err := apiconv.NewScheme()
	if err != nil {
		return err
	}
	opts := operator.ManagerOptions(scheme)
	opts.Metrics = metricsserver.Options{BindAddress: metricsAddr}
	opts.HealthProbeBindAddress = probeAddr
	opts.LeaderElection = leaderElect
	opts.LeaderElectionID = "openfief-operator"
	opts.LeaderElectionNamespace = plugins.Namespace
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return err
	}
	if _, err := operator.Setup(mgr, trust.NewPolicyVerifier(images, policy), cc); err != nil {
		return err
	}
	if err := operator.SetupSigningKeys(mgr, signingRefresh); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return fmt.Sprint([]string(*m)) }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
