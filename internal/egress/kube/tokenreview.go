package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"

	"github.com/arkadiuss/openfief/internal/egress"
)

// TokenReviewer implements egress.TokenReviewer with the TokenReview API. It
// asks for one audience, openfief-egress in the proxy, so a plugin's
// openfief-core token is refused there (D-63). Its caller needs permission to
// create tokenreviews.
type TokenReviewer struct {
	client   authv1client.TokenReviewsGetter
	audience string
}

// NewTokenReviewer returns a TokenReviewer that accepts only tokens whose
// audiences include audience.
func NewTokenReviewer(client authv1client.TokenReviewsGetter, audience string) (*TokenReviewer, error) {
	if audience == "" {
		return nil, errors.New("token reviewer: an audience is required")
	}
	return &TokenReviewer{client: client, audience: audience}, nil
}

// Review implements egress.TokenReviewer. A token the API server does not
// authenticate for the audience gives an error wrapping
// egress.ErrUnauthenticated; a failed call gives another error. Neither holds
// the token.
func (r *TokenReviewer) Review(ctx context.Context, token string) (string, error) {
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{
		Token:     token,
		Audiences: []string{r.audience},
	}}
	got, err := r.client.TokenReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token review: %w", err)
	}
	st := got.Status
	if !st.Authenticated {
		return "", fmt.Errorf("token review: %w", egress.ErrUnauthenticated)
	}
	// The API server names the audiences it matched; a reviewer that asked
	// for audiences must check one of them is its own.
	if !slices.Contains(st.Audiences, r.audience) {
		return "", fmt.Errorf("token review: audience %q not confirmed: %w", r.audience, egress.ErrUnauthenticated)
	}
	if st.User.Username == "" {
		return "", fmt.Errorf("token review: no username: %w", egress.ErrUnauthenticated)
	}
	return st.User.Username, nil
}
