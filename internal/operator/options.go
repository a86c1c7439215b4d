package operator

import (
	"time"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

// The defaults of cmd/operator's flags, all of them here. The flags start
// from DefaultOptions, which holds them, but for the client's rate limits
// (DefaultKubeAPIQPS, DefaultKubeAPIBurst), which configure the connection
// rather than Options. Three live where more than the operator needs them:
// plugins.DefaultCoreSubject (--core-service-account) and
// plugins.DefaultPluginPort (--plugin-port), which the compiled workload
// falls back on.
const (
	// DefaultCoreService and DefaultCorePort name the core's Service in
	// openfief and its port plugins call (--core-service, --core-port).
	DefaultCoreService = "openfief-core"
	DefaultCorePort    = "connect"
	// DefaultProxyService and DefaultProxyPort name the egress proxy's
	// Service in openfief and its port (--proxy-service, --proxy-port).
	DefaultProxyService = "openfief-egress-proxy"
	DefaultProxyPort    = "proxy"
	// DefaultTokenKeysRefresh is how often the API server's token signing
	// keys are read again, so a rotated key reaches plugins
	// (--signing-keys-refresh, D-59).
	DefaultTokenKeysRefresh = 10 * time.Minute
	// DefaultRegistryTimeout bounds one image verification's registry reads
	// (--registry-timeout).
	DefaultRegistryTimeout = 30 * time.Second
	// DefaultRegistryRetry is how soon a Plugin whose image could not be
	// read from its registry (unreachable, or refusing the read) is checked
	// again (--registry-retry).
	DefaultRegistryRetry = time.Minute
	// DefaultMetricsBindAddress is where the manager serves /metrics
	// (--metrics-bind-address).
	DefaultMetricsBindAddress = ":8080"
	// DefaultHealthProbeBindAddress is where the manager serves /healthz and
	// /readyz (--health-probe-bind-address).
	DefaultHealthProbeBindAddress = ":8081"
	// DefaultMaxConcurrentReconciles is how many Plugins reconcile at once
	// (--max-concurrent-reconciles).
	DefaultMaxConcurrentReconciles = 4
	// DefaultReconcileTimeout bounds one Plugin's reconcile
	// (--reconcile-timeout): above the registry timeout, so a verification
	// can finish, and far below anything an owner would wait for.
	DefaultReconcileTimeout = 2 * time.Minute
	// DefaultKubeAPIQPS and DefaultKubeAPIBurst limit the operator's client
	// towards the API server (--kube-api-qps, --kube-api-burst); chosen from
	// BenchmarkOperatorScale's figures (docs/operator.md, Scale).
	DefaultKubeAPIQPS   = 50
	DefaultKubeAPIBurst = 100
	// LeaderElectionID names the Lease in openfief that the replicas elect a
	// leader with.
	LeaderElectionID = "openfief-operator"
	// DefaultLeaseDuration, DefaultRenewDeadline and DefaultRetryPeriod time
	// the leader election (--leader-election-lease-duration,
	// --leader-election-renew-deadline, --leader-election-retry-period); they
	// are controller-runtime's defaults. A standby takes over at most about
	// a lease duration after the leader dies; a leader that cannot renew
	// within the renew deadline stops.
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Options configures one operator: what AddToManager registers and, through
// Options.ManagerOptions, how its manager serves. cmd/operator fills it from
// its flags, devstack and the tests from DefaultOptions, so every operator is
// built the same way. Each field names the flag that sets it.
type Options struct {
	// Cluster names the core's and the egress proxy's Services and what
	// every plugin pod is told about the core (--core-service, --core-port,
	// --proxy-service, --proxy-port, --core-service-account, --plugin-port),
	// and the isolation gate every plugin pod starts with (--isolation-gate*,
	// OF-42): AddToManager refuses Options without a gate image unless the
	// gate is disabled.
	Cluster ClusterConfig
	// TrustedSignersFile, when set, is a fixed signers.json read once at
	// start in place of the ConfigMap openfief-trusted-signers
	// (--trusted-signers, D-45): a missing file adds no signer, an
	// unreadable or invalid one makes AddToManager fail, so the operator
	// refuses to start, and a change needs a restart. Empty (the default)
	// follows the ConfigMap through the API and applies each change live
	// (OF-31). Unused when Images is set.
	TrustedSignersFile string
	// InsecureRegistries are the registry host[:port]s read over plain HTTP
	// (--insecure-registry); loopback registries always are. Unused when
	// Images is set.
	InsecureRegistries []string
	// RegistryConfigFile is a docker config.json holding registry
	// credentials (--registry-config), such as a Secret the cluster
	// admin mounts as a file; the operator never reads Secrets through the
	// API (D-29). It is read again whenever it changes. Empty reads
	// registries anonymously; a file that cannot be read or parsed makes
	// AddToManager fail, and once running refuses every read until it is
	// valid again. Unused when Images is set.
	RegistryConfigFile string
	// RegistryTimeout bounds one image verification's registry reads
	// (--registry-timeout); DefaultRegistryTimeout when not positive. Unused
	// when Images is set.
	RegistryTimeout time.Duration
	// RegistryRetry is how soon a Plugin whose image's registry could not
	// be read is reconciled again (--registry-retry); DefaultRegistryRetry
	// when not positive. The SignatureVerified message says it.
	RegistryRetry time.Duration
	// TokenKeysRefresh is how often the API server's token signing keys
	// are re-published to openfief-sa-jwks (--signing-keys-refresh, D-59);
	// DefaultTokenKeysRefresh when not positive.
	TokenKeysRefresh time.Duration
	// MaxConcurrentReconciles is how many Plugins reconcile at once
	// (--max-concurrent-reconciles); DefaultMaxConcurrentReconciles when not
	// positive.
	MaxConcurrentReconciles int
	// ReconcileTimeout bounds one Plugin's reconcile (--reconcile-timeout);
	// DefaultReconcileTimeout when not positive.
	ReconcileTimeout time.Duration
	// Images, when set, replaces the image checker AddToManager builds (a
	// trust.PolicyVerifier over the registry, D-57). Only tests set it; the
	// binary has no way to.
	Images trust.ImageChecker

	// MetricsBindAddress is where the manager serves Prometheus metrics
	// (--metrics-bind-address); empty or "0" serves none.
	MetricsBindAddress string
	// HealthProbeBindAddress is where the manager serves /healthz and
	// /readyz (--health-probe-bind-address); empty serves none.
	HealthProbeBindAddress string
	// LeaderElection makes replicas elect a leader through the Lease
	// LeaderElectionID in openfief, so only one acts (--leader-elect).
	LeaderElection bool
	// LeaseDuration, RenewDeadline and RetryPeriod time the election
	// (--leader-election-lease-duration, --leader-election-renew-deadline,
	// --leader-election-retry-period); zero keeps controller-runtime's
	// default, which the Default* constants repeat and DefaultOptions sets.
	// The manager refuses to start unless LeaseDuration > RenewDeadline >
	// 1.2 × RetryPeriod.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration

	// startRoot replaces the embedded Sigstore root the operator starts
	// from (cosign.EmbeddedTrustRoot) and verifierOptions add to the
	// registry verifier's options: tests only, with their own TUF
	// repository and virtual Sigstore, which issues no SCTs.
	startRoot       *cosign.TrustRoot
	verifierOptions []cosign.Option
}

// trustRootStart is the Sigstore root the operator trusts without the
// admin's ConfigMap, and the start of the TUF chain the ConfigMap's files
// are verified through.
func (o Options) trustRootStart() (cosign.TrustRoot, error) {
	if o.startRoot != nil {
		return *o.startRoot, nil
	}
	return cosign.EmbeddedTrustRoot()
}

// DefaultOptions returns the Options of cmd/operator's flag defaults: the
// default Service names, the owner's signers followed through the API,
// metrics on :8080, probes on :8081 and leader election on, timed as
// controller-runtime would, and the isolation gate's default targets and
// timing without an image, which the caller must set (OF-42).
func DefaultOptions() Options {
	return Options{
		Cluster: ClusterConfig{
			CoreService:  DefaultCoreService,
			CorePort:     DefaultCorePort,
			ProxyService: DefaultProxyService,
			ProxyPort:    DefaultProxyPort,
			CoreSubject:  plugins.DefaultCoreSubject,
			PluginPort:   plugins.DefaultPluginPort,
			Gate:         IsolationGate{Settings: plugins.DefaultGateSettings()},
		},
		RegistryTimeout:         DefaultRegistryTimeout,
		RegistryRetry:           DefaultRegistryRetry,
		MaxConcurrentReconciles: DefaultMaxConcurrentReconciles,
		ReconcileTimeout:        DefaultReconcileTimeout,
		TokenKeysRefresh:        DefaultTokenKeysRefresh,
		MetricsBindAddress:      DefaultMetricsBindAddress,
		HealthProbeBindAddress:  DefaultHealthProbeBindAddress,
		LeaderElection:          true,
		LeaseDuration:           DefaultLeaseDuration,
		RenewDeadline:           DefaultRenewDeadline,
		RetryPeriod:             DefaultRetryPeriod,
	}
}
