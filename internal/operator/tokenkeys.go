package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/arkadiuss/openfief/internal/plugins"
)

const (
	// TokenKeysFieldManager owns the fields of openfief-sa-jwks, apart
	// from the managers that own the plugins' objects (D-59).
	TokenKeysFieldManager = "openfief-operator/signing-keys"

	// The API server's ServiceAccount issuer discovery endpoints.
	openIDConfigurationPath = "/.well-known/openid-configuration"
	jwksPath                = "/openid/v1/jwks"
)

// ErrInvalidIssuer means the API server named a token issuer that is not an
// https URL without query or fragment, as OpenID discovery requires.
var ErrInvalidIssuer = errors.New("invalid issuer")

// IssuerDiscovery reads the cluster's ServiceAccount token issuer and the
// JWKS document of its token-signing public keys (D-59).
type IssuerDiscovery interface {
	Discover(ctx context.Context) (issuer string, jwks []byte, err error)
}

// APIServerDiscovery is the IssuerDiscovery of the API server itself: the
// issuer from /.well-known/openid-configuration and the keys from
// /openid/v1/jwks, both through the operator's own connection to the API
// server. It never follows the jwks_uri the configuration names, which may be
// an address the operator can't reach. Both are non-resource URLs that the
// default ClusterRole system:service-account-issuer-discovery lets every
// ServiceAccount read, so the operator keeps its Role-only footprint (D-15).
type APIServerDiscovery struct {
	client rest.Interface
}

// NewAPIServerDiscovery returns the APIServerDiscovery of the API server cfg
// connects to, as cfg's identity.
func NewAPIServerDiscovery(cfg *rest.Config) (*APIServerDiscovery, error) {
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("issuer discovery client: %w", err)
	}
	return &APIServerDiscovery{client: d.RESTClient()}, nil
}

// Discover reads the issuer and the raw JWKS document; the caller validates
// the keys with plugins.ParseTokenKeys.
func (d *APIServerDiscovery) Discover(ctx context.Context) (string, []byte, error) {
	raw, err := d.client.Get().AbsPath(openIDConfigurationPath).DoRaw(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("read %s: %w", openIDConfigurationPath, err)
	}
	var conf struct {
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal(raw, &conf); err != nil {
		return "", nil, fmt.Errorf("read %s: %w", openIDConfigurationPath, err)
	}
	jwks, err := d.client.Get().AbsPath(jwksPath).DoRaw(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("read %s: %w", jwksPath, err)
	}
	return conf.Issuer, jwks, nil
}

// TokenKeysPublisher publishes the cluster's ServiceAccount token issuer and
// the public keys that sign its tokens (not image signers: those are
// ownersigners.go) in the ConfigMap openfief-sa-jwks (keys jwks.json and issuer), which every
// plugin pod mounts so the SDK can verify the core's tokens itself (D-59). It
// runs once at start, every Refresh, and on every change to or deletion of
// that ConfigMap, so an edited or deleted one is put back. It writes only
// when the published content differs, with server-side apply under
// TokenKeysFieldManager; if the keys can't be read or don't validate, what
// was published stays.
type TokenKeysPublisher struct {
	// Client reads the ConfigMap (the manager's cache) and applies it.
	Client client.Client
	// Discovery reads the issuer and the keys.
	Discovery IssuerDiscovery
	// Refresh is how often the keys are read again;
	// DefaultTokenKeysRefresh if zero.
	Refresh time.Duration
}

// tokenKeysKey is the publisher's one reconcile request.
var tokenKeysKey = types.NamespacedName{Namespace: plugins.Namespace, Name: plugins.TokenKeysConfigMap}

// SetupWithManager runs the publisher in mgr's leader: once at start, on
// every event of openfief-sa-jwks, and every Refresh.
func (p *TokenKeysPublisher) SetupWithManager(mgr ctrl.Manager) error {
	isJWKS := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == tokenKeysKey.Namespace && o.GetName() == tokenKeysKey.Name
	})
	atStart := source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(reconcile.Request{NamespacedName: tokenKeysKey})
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("signing-keys").
		For(&corev1.ConfigMap{}, builder.WithPredicates(isJWKS)).
		WatchesRawSource(atStart).
		Complete(p)
}

// Reconcile publishes the keys and comes back after Refresh. A failure is
// returned, so the request is retried with back-off while the published
// keys stay.
func (p *TokenKeysPublisher) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	if _, err := p.Publish(ctx); err != nil {
		return reconcile.Result{}, err
	}
	refresh := p.Refresh
	if refresh <= 0 {
		refresh = DefaultTokenKeysRefresh
	}
	return reconcile.Result{RequeueAfter: refresh}, nil
}

// Publish reads and validates the issuer and keys and applies them when the
// published ConfigMap differs, reporting whether it wrote. On any error
// nothing is written.
func (p *TokenKeysPublisher) Publish(ctx context.Context) (bool, error) {
	issuer, raw, err := p.Discovery.Discover(ctx)
	if err != nil {
		return false, fmt.Errorf("discover signing keys: %w", err)
	}
	if err := checkIssuer(issuer); err != nil {
		return false, err
	}
	keys, err := plugins.ParseTokenKeys(raw)
	if err != nil {
		return false, fmt.Errorf("signing keys of the API server: %w", err)
	}
	data := map[string]string{
		plugins.TokenKeysJWKSKey:   string(keys.JWKS()),
		plugins.TokenKeysIssuerKey: issuer,
	}
	labels := map[string]string{plugins.LabelManagedBy: plugins.ValueManagedBy}

	var current corev1.ConfigMap
	switch err := p.Client.Get(ctx, tokenKeysKey, &current); {
	case err == nil && holdsAll(current.Data, data) && holdsAll(current.Labels, labels):
		return false, nil
	case err != nil && !apierrors.IsNotFound(err):
		return false, fmt.Errorf("read %s: %w", tokenKeysKey, err)
	}
	ac := corev1ac.ConfigMap(tokenKeysKey.Name, tokenKeysKey.Namespace).WithLabels(labels).WithData(data)
	if err := p.Client.Apply(ctx, ac, client.FieldOwner(TokenKeysFieldManager), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("apply %s: %w", tokenKeysKey, err)
	}
	ctrllog.FromContext(ctx).Info("published signing keys", "configMap", tokenKeysKey.String(), "issuer", issuer, "keys", keys.Len())
	return true, nil
}

// holdsAll reports whether have holds every entry of want.
func holdsAll(have, want map[string]string) bool {
	for k, v := range want {
		if w, ok := have[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// checkIssuer applies the domain's rule for an OIDC issuer
// (plugins.CheckIssuer, the rule a keyless signer's issuer follows too) to
// the issuer the API server names, as ErrInvalidIssuer.
func checkIssuer(issuer string) error {
	if err := plugins.CheckIssuer(issuer); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidIssuer, err)
	}
	return nil
}
