package ocisign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// GitHub Actions hands a job with `permissions: id-token: write` these two
// variables; a GET of the URL with the bearer token returns an OIDC token for
// the audience asked.
const (
	githubTokenURLEnv     = "ACTIONS_ID_TOKEN_REQUEST_URL"
	githubTokenRequestEnv = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"
	// SigstoreAudience is the audience Fulcio accepts.
	SigstoreAudience = "sigstore"
	// maxTokenResponse bounds the token endpoint's answer: a GitHub OIDC
	// token is about 1.5 KiB.
	maxTokenResponse = 64 << 10
	tokenTimeout     = 30 * time.Second
)

// ErrNoGitHubToken says the process is not in a GitHub Actions job that may
// ask for an OIDC token (id-token: write).
var ErrNoGitHubToken = errors.New("no GitHub Actions OIDC token: " + githubTokenURLEnv + " and " + githubTokenRequestEnv + " must be set (a workflow job with permissions id-token: write)")

// GitHubTokenSource fetches OIDC tokens for the sigstore audience from the
// GitHub Actions runner. The endpoint must be https; its answer is read up to
// a bound, a redirect is refused, and neither the request token nor the OIDC
// token ever appears in an error.
type GitHubTokenSource struct {
	requestURL   string
	requestToken string
	client       *http.Client
}

// GitHubTokenSourceFromEnv reads the runner's variables; it fails with
// ErrNoGitHubToken when either is missing.
func GitHubTokenSourceFromEnv() (*GitHubTokenSource, error) {
	u, t := os.Getenv(githubTokenURLEnv), os.Getenv(githubTokenRequestEnv)
	if u == "" || t == "" {
		return nil, ErrNoGitHubToken
	}
	return NewGitHubTokenSource(u, t, nil)
}

// NewGitHubTokenSource asks requestURL with requestToken. transport is the
// round tripper to use (nil: http.DefaultTransport); tests pass a TLS test
// server's.
func NewGitHubTokenSource(requestURL, requestToken string, transport http.RoundTripper) (*GitHubTokenSource, error) {
	u, err := url.Parse(requestURL)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("%s is not an https URL", githubTokenURLEnv)
	}
	if requestToken == "" {
		return nil, ErrNoGitHubToken
	}
	q := u.Query()
	q.Set("audience", SigstoreAudience)
	u.RawQuery = q.Encode()
	return &GitHubTokenSource{
		requestURL:   u.String(),
		requestToken: requestToken,
		client: &http.Client{
			Transport: transport,
			Timeout:   tokenTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
	}, nil
}

// Token fetches a fresh OIDC token (each call: GitHub's tokens are short
// lived, and Fulcio wants one minted just before it certifies a key).
func (g *GitHubTokenSource) Token(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.requestURL, nil)
	if err != nil {
		return "", fmt.Errorf("GitHub OIDC token request: %w", err)
	}
	req.Header.Set("Authorization", "bearer "+g.requestToken)
	req.Header.Set("Accept", "application/json")
	resp, err := g.client.Do(req)
	if err != nil {
		// url.Error names the URL, which holds no secret (the request
		// token travels in a header).
		return "", fmt.Errorf("GitHub OIDC token request: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GitHub OIDC token endpoint answered %d, want 200 (redirects are not followed)", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse+1))
	if err != nil {
		return "", fmt.Errorf("GitHub OIDC token response: %w", err)
	}
	if len(body) > maxTokenResponse {
		return "", fmt.Errorf("GitHub OIDC token response is larger than %d bytes", maxTokenResponse)
	}
	return ParseGitHubTokenResponse(body)
}

// ParseGitHubTokenResponse reads the token endpoint's JSON answer,
// {"value": "<JWT>"}, and checks the token has a JWT's shape: three
// non-empty base64url parts. Errors never quote the input.
func ParseGitHubTokenResponse(body []byte) (string, error) {
	var r struct {
		Value string `json:"value"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return "", errors.New("GitHub OIDC token response is not the expected JSON object")
	}
	parts := strings.Split(r.Value, ".")
	if len(parts) != 3 {
		return "", errors.New("GitHub OIDC token response holds no JWT")
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return "", errors.New("GitHub OIDC token response holds no JWT")
		}
	}
	return r.Value, nil
}
