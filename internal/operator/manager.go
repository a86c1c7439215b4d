package operator

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

// ManagerOptions returns the options of the operator's manager over scheme s
// (build it with apiconv.NewScheme): the cache confined to the openfief
// namespace, so it watches nothing elsewhere (D-15), and holding cut-down
// copies (cacheOptions, OF-15, OF-16); metrics and probes
// served at o's addresses; and, when o.LeaderElection, a leader elected
// through the Lease LeaderElectionID in openfief, timed by o's
// LeaseDuration, RenewDeadline and RetryPeriod where they are set, and
// released by a leader that stops.
func (o Options) ManagerOptions(s *runtime.Scheme) ctrl.Options {
	metrics := o.MetricsBindAddress
	if metrics == "" {
		metrics = "0" // controller-runtime would read empty as :8080
	}
	positive := func(d time.Duration) *time.Duration {
		if d <= 0 {
			return nil // controller-runtime's default
		}
		return &d
	}
	return ctrl.Options{
		Scheme:                  s,
		Cache:                   cacheOptions(),
		Metrics:                 metricsserver.Options{BindAddress: metrics},
		HealthProbeBindAddress:  o.HealthProbeBindAddress,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: plugins.Namespace,
		// A leader that stops (a rollout, a drain, SIGTERM) releases the
		// Lease once its controllers have stopped, so the next replica leads
		// at once instead of after LeaseDuration. Safe because cmd/operator
		// exits as soon as the manager returns: nothing acts after the
		// release.
		LeaderElectionReleaseOnCancel: o.LeaderElection,
		LeaseDuration:                 positive(o.LeaseDuration),
		RenewDeadline:                 positive(o.RenewDeadline),
		RetryPeriod:                   positive(o.RetryPeriod),
	}
}

// Reconcilers is everything the operator runs in one manager.
type Reconcilers struct {
	// Plugins runs each Plugin (D-13, D-16).
	Plugins *PluginReconciler
	// Grants sets each PluginGrant's Valid condition.
	Grants *GrantReconciler
	// Pruner removes allow-list keys of Plugins that are gone (OF-3).
	Pruner *AllowListPruner
	// TokenKeys publishes the token signing keys to plugins (D-59).
	TokenKeys *TokenKeysPublisher
}

// AddToManager builds the operator o describes into mgr, all sharing mgr's
// client (the Plugin reconciler also mgr's API reader, for the live reads
// of a Deployment its cache may not have seen yet): the allow-list writer (OF-15), the image checker (a trust.PolicyVerifier over the owner's signers
// and the embedded catalog, D-45 and D-57, unless o.Images is set) with the
// Sigstore root it verifies keyless signatures with (the embedded one, or
// the administrator's ConfigMap openfief-sigstore-root once it verifies,
// followed live, and its status publisher), the
// Plugin reconciler with an events.k8s.io/v1 recorder that keeps no copy of
// what it wrote (eventWriter, EventReportingController), the PluginGrant reconciler, the allow-list
// pruner, the signing-key publisher reading the API server mgr connects to,
// the Plugins' conditions on the metrics endpoint (metrics.go) and a
// /healthz and /readyz check. A signers file that can't be read or
// parsed is an error, as is a Sigstore root ConfigMap that can't be read,
// so the operator refuses to start rather than trust less or more than the
// owner said; so is an isolation gate without an image
// (ErrNoIsolationGate) unless it is disabled (OF-42).
func AddToManager(mgr ctrl.Manager, o Options) (*Reconcilers, error) {
	if err := o.Cluster.Gate.Validate(); err != nil {
		return nil, err
	}
	images := o.Images
	recorder := newEventWriter(mgr.GetClient(), mgr.GetScheme(), mgr.GetLogger().WithName("events"))
	if err := mgr.Add(recorder); err != nil {
		return nil, fmt.Errorf("add the Event writer: %w", err)
	}
	var (
		signers *ownerSigners
		roots   *trustRoots
	)
	if images == nil {
		opts, err := registryOptions(o)
		if err != nil {
			return nil, err
		}
		start, err := o.trustRootStart()
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), startReadTimeout)
		defer cancel()
		if roots, err = newTrustRoots(ctx, mgr.GetAPIReader(), start, recorder, mgr.GetLogger().WithName("sigstore-root")); err != nil {
			return nil, err
		}
		newImages := func(p plugins.TrustPolicy) (cosign.ImageVerifier, error) {
			// Clipped, so each call appends to a copy: readers are built
			// from more than one goroutine.
			return trust.NewImageVerifier(p, append(slices.Clip(opts), cosign.WithTrustedMaterial(roots.material()))...)
		}
		if o.TrustedSignersFile != "" {
			policy, err := trust.LoadPolicy(o.TrustedSignersFile)
			if err != nil {
				return nil, err
			}
			first, err := newImages(policy)
			if err != nil {
				return nil, err
			}
			fixed := trust.NewPolicyVerifier(first, policy)
			roots.rebuild = func() error {
				next, err := newImages(policy)
				if err != nil {
					return err
				}
				fixed.Replace(next, policy)
				return nil
			}
			images = fixed
		} else {
			signers, err = newOwnerSigners(ctx, mgr.GetAPIReader(), newImages, recorder, mgr.GetLogger().WithName("trusted-signers"))
			if err != nil {
				return nil, err
			}
			roots.rebuild = signers.rebuild
			images = signers.verifier
		}
	}
	discovery, err := NewAPIServerDiscovery(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	c := mgr.GetClient()
	if err := registerPluginMetrics(c); err != nil {
		return nil, fmt.Errorf("register the plugin metrics: %w", err)
	}
	allowList := &AllowListWriter{Client: c}
	if err := mgr.Add(allowList); err != nil {
		return nil, fmt.Errorf("add allow-list writer: %w", err)
	}
	r := &Reconcilers{
		Plugins: &PluginReconciler{Client: c, Reader: mgr.GetAPIReader(), Images: images, Cluster: o.Cluster, AllowList: allowList,
			MaxConcurrentReconciles: o.MaxConcurrentReconciles, ReconcileTimeout: o.ReconcileTimeout, RegistryRetry: o.RegistryRetry,
			Recorder: recorder, signers: signers, roots: roots},
		Grants:    &GrantReconciler{Client: c},
		Pruner:    &AllowListPruner{Client: c},
		TokenKeys: &TokenKeysPublisher{Client: c, Discovery: discovery, Refresh: o.TokenKeysRefresh},
	}
	if err := r.Plugins.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up plugin reconciler: %w", err)
	}
	if roots != nil {
		if err := (&trustRootPublisher{client: c, roots: roots}).SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("set up the Sigstore root's status: %w", err)
		}
	}
	if err := r.Grants.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up grant reconciler: %w", err)
	}
	if err := r.Pruner.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up allow-list pruner: %w", err)
	}
	if err := r.TokenKeys.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up signing-key publisher: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add healthz check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add readyz check: %w", err)
	}
	return r, nil
}

// startReadTimeout bounds the read of the owner's signers at start.
const startReadTimeout = 30 * time.Second

// NewImageChecker builds the image checker of the binary from o (D-57) with
// a fixed owner: the trust policy of OpenFief's CI, the embedded catalog and
// the owner's signers from o.TrustedSignersFile (D-45), read once, over a
// registry verifier as registryOptions sets it up. It ignores o.Images.
// Without a file, AddToManager builds the checker itself and follows the
// ConfigMap openfief-trusted-signers (OF-31).
func NewImageChecker(o Options) (*trust.PolicyVerifier, error) {
	policy, err := trust.LoadPolicy(o.TrustedSignersFile)
	if err != nil {
		return nil, err
	}
	opts, err := registryOptions(o)
	if err != nil {
		return nil, err
	}
	images, err := trust.NewImageVerifier(policy, opts...)
	if err != nil {
		return nil, err
	}
	return trust.NewPolicyVerifier(images, policy), nil
}

// registryOptions are the registry verifier's options from o: plain HTTP
// for o.InsecureRegistries, the credentials of o.RegistryConfigFile when
// set (one keychain, shared by every verifier built from the options) and
// o.RegistryTimeout.
func registryOptions(o Options) ([]cosign.Option, error) {
	timeout := o.RegistryTimeout
	if timeout <= 0 {
		timeout = DefaultRegistryTimeout
	}
	opts := []cosign.Option{cosign.WithInsecureRegistries(o.InsecureRegistries...), cosign.WithTimeout(timeout)}
	opts = append(opts, o.verifierOptions...)
	if o.RegistryConfigFile != "" {
		kc, err := cosign.NewFileKeychain(o.RegistryConfigFile)
		if err != nil {
			return nil, fmt.Errorf("--registry-config: %w", err)
		}
		opts = append(opts, cosign.WithKeychain(kc))
	}
	return opts, nil
}
