package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	authv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"

	"github.com/arkadiuss/openfief/internal/egress"
	"github.com/arkadiuss/openfief/internal/egress/kube"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// ErrRefused wraps every reason Verify refuses a token: the token was looked
// at and is not a current openfief-core token of a plugin instance the core
// serves. Any other error means the core could not tell (the API server is
// unreachable, too many reviews in flight), and the caller may retry.
var ErrRefused = errors.New("plugin token refused")

// DefaultCacheTTL is how long the core trusts an accepted review: shorter
// than the proxy's five minutes, because a revoked ServiceAccount should stop
// reaching the core soon; the instance check (Options.Serving) refuses a
// revoked plugin at once anyway.
const DefaultCacheTTL = time.Minute

// Options configures NewVerifier.
type Options struct {
	// Serving reports whether the core serves the plugin instance now (its
	// Plugin exists and runs under a grant). Nil serves every instance;
	// the core sets it from its Plugin informer.
	Serving func(instance string) bool
	// CacheTTL bounds how long an accepted review is reused (never past the
	// token's own exp); zero means DefaultCacheTTL, negative disables the
	// cache.
	CacheTTL time.Duration
	// CacheSize bounds the cached reviews; zero means the proxy's default.
	CacheSize int
	// Now replaces time.Now, for tests.
	Now func() time.Time
}

// Verifier verifies plugins' openfief-core tokens (D-27). It is safe for
// concurrent use.
type Verifier struct {
	reviewer egress.TokenReviewer
	serving  func(string) bool
}

// NewVerifier returns a Verifier that asks the TokenReview API through
// client for the audience openfief-core. Its caller needs permission to
// create tokenreviews.
func NewVerifier(client authv1client.TokenReviewsGetter, opts Options) (*Verifier, error) {
	inner, err := kube.NewTokenReviewer(client, plugins.AudienceCore)
	if err != nil {
		return nil, err
	}
	return newVerifier(inner, opts), nil
}

// newVerifier wraps any reviewer of openfief-core tokens in the cache.
func newVerifier(inner egress.TokenReviewer, opts Options) *Verifier {
	if opts.CacheTTL == 0 {
		opts.CacheTTL = DefaultCacheTTL
	}
	serving := opts.Serving
	if serving == nil {
		serving = func(string) bool { return true }
	}
	return &Verifier{reviewer: newCachingReviewer(inner, opts), serving: serving}
}

// newCachingReviewer wraps inner in the proxy's review cache with opts'
// CacheTTL (negative disables it), CacheSize and Now.
func newCachingReviewer(inner egress.TokenReviewer, opts Options) *egress.CachingTokenReviewer {
	copts := []egress.CachingOption{egress.WithCacheTTL(opts.CacheTTL)}
	if opts.CacheSize > 0 {
		copts = append(copts, egress.WithCacheSize(opts.CacheSize))
	}
	if opts.Now != nil {
		copts = append(copts, egress.WithClock(opts.Now))
	}
	return egress.NewCachingTokenReviewer(inner, copts...)
}

// Verify returns the plugin instance token belongs to: the API server
// authenticated it for the audience openfief-core as the ServiceAccount
// plugin-<instance> in the openfief namespace, and the core serves that
// instance. A refusal wraps ErrRefused; no error holds the token.
func (v *Verifier) Verify(ctx context.Context, token string) (string, error) {
	username, err := v.reviewer.Review(ctx, token)
	switch {
	case errors.Is(err, egress.ErrUnauthenticated):
		return "", fmt.Errorf("%w: not a valid %s token", ErrRefused, plugins.AudienceCore)
	case err != nil:
		return "", fmt.Errorf("verifying a plugin token: %w", err)
	}
	instance, ok := plugins.PluginForServiceAccount(username)
	if !ok {
		return "", fmt.Errorf("%w: %q is not a plugin's ServiceAccount", ErrRefused, username)
	}
	if !v.serving(instance) {
		return "", fmt.Errorf("%w: plugin %q is not served (uninstalled, revoked or not running)", ErrRefused, instance)
	}
	return instance, nil
}

// VerifyFor returns nil only when token is a current openfief-core token of
// the plugin instance named instance; the token of any other instance is
// refused (D-27).
func (v *Verifier) VerifyFor(ctx context.Context, token, instance string) error {
	got, err := v.Verify(ctx, token)
	if err != nil {
		return err
	}
	if got != instance {
		return fmt.Errorf("%w: the token is plugin %q's, not %q's", ErrRefused, got, instance)
	}
	return nil
}
