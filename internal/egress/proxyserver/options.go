package proxyserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/egress"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// Defaults of Options that the egress package does not already define.
const (
	// DefaultListen is where the proxy serves CONNECT (--listen): the port
	// deploy/egress-proxy's Service targets.
	DefaultListen = ":3128"
	// DefaultMetricsListen serves /healthz, /readyz and /metrics
	// (--metrics-listen).
	DefaultMetricsListen = ":9090"
)

// Options configures the egress proxy as a whole: cmd/egress-proxy fills
// it from its flags, `openfief dev` in code. Each field that has a flag
// names it; DefaultOptions holds the flags' defaults. Validation errors name
// the flag, or the field for the fields without one.
type Options struct {
	// Client reaches the API server as the proxy's own identity, which
	// needs create on tokenreviews and get, list and watch on the
	// allow-list ConfigMap (deploy/egress-proxy). Required.
	Client kubernetes.Interface
	// Listen is where the proxy serves CONNECT (--listen); "127.0.0.1:0"
	// picks a free port, which Server.Addr tells.
	Listen string
	// MetricsListen is where /healthz, /readyz and /metrics are served
	// (--metrics-listen); empty serves none of them. Server.MetricsAddr
	// tells the bound address.
	MetricsListen string
	// Namespace and AllowListConfigMap name the allow-list ConfigMap the
	// operator writes (--namespace, --allowlist-configmap); empty means
	// plugins.Namespace and plugins.AllowListConfigMap.
	Namespace, AllowListConfigMap string
	// DialTimeout bounds the lookup and each connection attempt
	// (--dial-timeout); IdleTimeout closes a tunnel without traffic
	// (--idle-timeout). Zero or less means the egress package's default.
	DialTimeout, IdleTimeout time.Duration
	// ReviewCacheTTL is how long an accepted token review is kept
	// (--review-cache-ttl): at most egress.MaxReviewCacheTTL, never past
	// the token's expiry; zero or less disables the cache.
	ReviewCacheTTL time.Duration
	// ShutdownGrace is how long open tunnels may continue once serving
	// ends (--shutdown-grace); zero or less closes them at once.
	ShutdownGrace time.Duration
	// MaxTunnelsPerPlugin and MaxTunnels cap the open tunnels of one
	// plugin (429 beyond) and of all (503 beyond)
	// (--max-tunnels-per-plugin, --max-tunnels).
	MaxTunnelsPerPlugin, MaxTunnels int
	// MaxPendingConns and MaxPendingPerClient cap the connections held
	// before they become tunnels, over all clients and per client IP
	// (--max-pending-conns, --max-pending-per-client).
	MaxPendingConns, MaxPendingPerClient int
	// ClusterDomain is the cluster's DNS domain, under which CONNECT
	// targets are refused (--cluster-domain).
	ClusterDomain string
	// Log receives the access log and the servers' errors; nil means
	// slog.Default().
	Log *slog.Logger

	// Resolver, Dialer and UnsafeAllowPrefixes replace the proxy's name
	// resolution and connections and exempt address ranges from its
	// refusals (egress.Options). The binary has no flag for them: only the
	// local platform and the tests set them, to stand in for an
	// institution on loopback.
	Resolver            egress.Resolver
	Dialer              egress.Dialer
	UnsafeAllowPrefixes []netip.Prefix
}

// DefaultOptions returns the Options the binary starts from, which are its
// flags' defaults; only Client is left to set.
func DefaultOptions() Options {
	return Options{
		Listen:              DefaultListen,
		MetricsListen:       DefaultMetricsListen,
		Namespace:           plugins.Namespace,
		AllowListConfigMap:  plugins.AllowListConfigMap,
		DialTimeout:         egress.DefaultDialTimeout,
		IdleTimeout:         egress.DefaultIdleTimeout,
		ReviewCacheTTL:      egress.MaxReviewCacheTTL,
		ShutdownGrace:       egress.DefaultShutdownGrace,
		MaxTunnelsPerPlugin: egress.DefaultMaxTunnelsPerPlugin,
		MaxTunnels:          egress.DefaultMaxTunnels,
		MaxPendingConns:     egress.DefaultMaxPendingConns,
		MaxPendingPerClient: egress.DefaultMaxPendingPerClient,
		ClusterDomain:       egress.DefaultClusterDomain,
	}
}

// Validate reports every setting the proxy cannot start with, each named by
// its flag. It does not look at Client, which a caller may set after
// checking its flags (Start requires it).
func (o Options) Validate() error {
	var errs []error
	if o.ReviewCacheTTL > egress.MaxReviewCacheTTL {
		errs = append(errs, fmt.Errorf("--review-cache-ttl: %v is longer than %v", o.ReviewCacheTTL, egress.MaxReviewCacheTTL))
	}
	return errors.Join(errs...)
}

// withDefaults fills in the names and the logger left empty.
func (o Options) withDefaults() Options {
	if o.Namespace == "" {
		o.Namespace = plugins.Namespace
	}
	if o.AllowListConfigMap == "" {
		o.AllowListConfigMap = plugins.AllowListConfigMap
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return o
}
