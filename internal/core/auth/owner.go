package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	authv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/egress"
	"github.com/arkadiuss/openfief/internal/egress/kube"
)

// ErrNotOwner is wrapped, besides ErrRefused, by OwnerVerifier.Verify's
// error when the API server authenticated the token for the owner's audience
// but as someone else than the owner's ServiceAccount: the caller is known
// and not allowed (403), rather than unknown (401).
var ErrNotOwner = errors.New("not the owner's ServiceAccount")

// OwnerCacheTTL bounds how long an accepted owner token is answered from the
// cache (never past the token's exp). Owner requests are a few per command,
// so a short bound costs little, and a deleted openfief-owner ServiceAccount
// stops working within it (plus the API server's own ten seconds).
const OwnerCacheTTL = 10 * time.Second

// OwnerVerifier verifies the owner's credential on the owner API (OF-18): a
// token the API server authenticates for the audience ownerapi.Audience as
// exactly the ServiceAccount ownerapi.ServiceAccount of the platform
// namespace. It reuses the egress proxy's caching TokenReview, so accepted
// reviews last at most OwnerCacheTTL and never past the token's exp, refusals
// 30 s, the cache holds at most 4096 entries keyed by the token's SHA-256,
// and tokens that are not JWTs with a future exp cost no review. It is safe
// for concurrent use.
type OwnerVerifier struct {
	reviewer egress.TokenReviewer
	username string
}

// NewOwnerVerifier returns an OwnerVerifier for the owner of namespace that
// asks the TokenReview API through client. Of opts, CacheTTL (zero means
// OwnerCacheTTL, negative disables the cache), CacheSize and Now apply;
// Serving does not. Its caller needs permission to create tokenreviews.
func NewOwnerVerifier(client authv1client.TokenReviewsGetter, namespace string, opts Options) (*OwnerVerifier, error) {
	inner, err := kube.NewTokenReviewer(client, ownerapi.Audience)
	if err != nil {
		return nil, err
	}
	return newOwnerVerifier(inner, namespace, opts), nil
}

// newOwnerVerifier wraps any reviewer of owner tokens in the cache.
func newOwnerVerifier(inner egress.TokenReviewer, namespace string, opts Options) *OwnerVerifier {
	if opts.CacheTTL == 0 {
		opts.CacheTTL = OwnerCacheTTL
	}
	return &OwnerVerifier{
		reviewer: newCachingReviewer(inner, opts),
		username: ownerapi.OwnerUsername(namespace),
	}
}

// Verify returns nil only for a current owner token. A refusal wraps
// ErrRefused (and ErrNotOwner when the token is someone else's); any other
// error means the core could not tell. No error holds the token.
func (v *OwnerVerifier) Verify(ctx context.Context, token string) error {
	username, err := v.reviewer.Review(ctx, token)
	switch {
	case errors.Is(err, egress.ErrUnauthenticated):
		return fmt.Errorf("%w: not a current %s token (expired, another audience, revoked or malformed)", ErrRefused, ownerapi.Audience)
	case err != nil:
		return fmt.Errorf("verifying the owner's token: %w", err)
	case username != v.username:
		return fmt.Errorf("%w: %w: the token is %q's, the owner API takes only %q's", ErrRefused, ErrNotOwner, username, v.username)
	}
	return nil
}
