package egress

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// TokenReviewer tells whether an egress token is valid and whose it is
// (D-63). kube.TokenReviewer asks the TokenReview API with the audience
// openfief-egress.
type TokenReviewer interface {
	// Review returns the Kubernetes username the token authenticates as. It
	// returns an error wrapping ErrUnauthenticated when the token is not
	// valid for the proxy, and any other error when it could not tell.
	// Errors never contain the token.
	Review(ctx context.Context, token string) (username string, err error)
}

// ErrUnauthenticated is wrapped by a TokenReviewer's error when the token was
// looked at and refused, as opposed to a review that could not be done.
var ErrUnauthenticated = errors.New("token not accepted")

// MaxReviewCacheTTL is the longest an accepted review is cached. A token
// revoked (its pod deleted) is thus refused within five minutes at most.
const MaxReviewCacheTTL = 5 * time.Minute

// Defaults of CachingTokenReviewer.
const (
	defaultReviewCacheEntries = 4096
	// DefaultMaxReviewsInFlight bounds the inner reviews running at once.
	DefaultMaxReviewsInFlight = 32
	// refusalTTL is how long a refused token is answered from the cache: a
	// token the API server refused (bad signature, audience, expiry, a
	// deleted pod) does not become valid again.
	refusalTTL = 30 * time.Second
)

// ErrReviewCapacity is returned when DefaultMaxReviewsInFlight (or the
// WithMaxReviewsInFlight bound) reviews are already running; the proxy
// answers 503, and the client may retry.
var ErrReviewCapacity = errors.New("too many token reviews in flight")

// CachingTokenReviewer caches the accepted reviews of another TokenReviewer
// so that a plugin's tunnels do not each cost a TokenReview (D-63). An entry
// lasts at most the TTL (five minutes or less) and never past the token's own
// exp claim, which is read without verifying the token: it can only shorten
// the entry, and the inner reviewer already checked the token in full.
//
// Made-up tokens cost the API server nothing: a token
// that is not a JWT with a readable exp in the future is refused before any
// review (projected ServiceAccount tokens always carry exp); a refusal is
// remembered for 30 seconds; and at most DefaultMaxReviewsInFlight inner
// reviews run at once, beyond which Review fails fast with
// ErrReviewCapacity. Errors other than refusals are never cached.
// Concurrent reviews of one token share one inner call, bounded by
// DefaultReviewTimeout and not cancelled when the caller that started it
// gives up. Entries are keyed by the token's SHA-256, so the cache holds no
// token.
type CachingTokenReviewer struct {
	inner   TokenReviewer
	ttl     time.Duration
	max     int
	now     func() time.Time
	metrics *Metrics
	// inFlight holds one token per inner review running.
	inFlight chan struct{}

	group singleflight.Group

	mu      sync.Mutex
	entries map[[sha256.Size]byte]reviewEntry
}

// reviewEntry is a cached answer: the username of an accepted token, or
// refused set for a refused one.
type reviewEntry struct {
	username string
	refused  bool
	expires  time.Time
}

// CachingOption configures NewCachingTokenReviewer.
type CachingOption func(*CachingTokenReviewer)

// WithCacheTTL sets how long an accepted review is kept; it is capped at
// MaxReviewCacheTTL, and zero or less disables caching.
func WithCacheTTL(d time.Duration) CachingOption {
	return func(c *CachingTokenReviewer) { c.ttl = min(d, MaxReviewCacheTTL) }
}

// WithCacheSize bounds the number of cached reviews (default 4096). When full,
// expired entries go first, then arbitrary ones.
func WithCacheSize(n int) CachingOption {
	return func(c *CachingTokenReviewer) { c.max = max(n, 1) }
}

// WithClock replaces time.Now, for tests.
func WithClock(now func() time.Time) CachingOption {
	return func(c *CachingTokenReviewer) { c.now = now }
}

// WithMaxReviewsInFlight bounds the inner reviews running at once (default
// DefaultMaxReviewsInFlight); at least 1.
func WithMaxReviewsInFlight(n int) CachingOption {
	return func(c *CachingTokenReviewer) { c.inFlight = make(chan struct{}, max(n, 1)) }
}

// WithReviewMetrics counts cache hits and misses and the inner reviews'
// results in m.
func WithReviewMetrics(m *Metrics) CachingOption {
	return func(c *CachingTokenReviewer) { c.metrics = m }
}

// NewCachingTokenReviewer wraps inner in a cache as CachingTokenReviewer
// describes.
func NewCachingTokenReviewer(inner TokenReviewer, opts ...CachingOption) *CachingTokenReviewer {
	c := &CachingTokenReviewer{
		inner:   inner,
		ttl:     MaxReviewCacheTTL,
		max:     defaultReviewCacheEntries,
		now:     time.Now,
		entries: map[[sha256.Size]byte]reviewEntry{},
	}
	for _, o := range opts {
		o(c)
	}
	if c.inFlight == nil {
		c.inFlight = make(chan struct{}, DefaultMaxReviewsInFlight)
	}
	if c.metrics == nil {
		c.metrics, _ = NewMetrics(nil)
	}
	return c
}

// Review implements TokenReviewer.
func (c *CachingTokenReviewer) Review(ctx context.Context, token string) (string, error) {
	if exp, ok := jwtExpiry(token); !ok || !exp.After(c.now()) {
		c.metrics.reviews.WithLabelValues("malformed").Inc()
		return "", fmt.Errorf("token review: not a JWT with a future exp: %w", ErrUnauthenticated)
	}
	key := sha256.Sum256([]byte(token))
	if e, ok := c.lookup(key); ok {
		c.metrics.reviewCache.WithLabelValues("hit").Inc()
		if e.refused {
			return "", fmt.Errorf("token review: refused earlier: %w", ErrUnauthenticated)
		}
		return e.username, nil
	}
	c.metrics.reviewCache.WithLabelValues("miss").Inc()
	ch := c.group.DoChan(string(key[:]), func() (any, error) {
		select {
		case c.inFlight <- struct{}{}:
			defer func() { <-c.inFlight }()
		default:
			c.metrics.reviews.WithLabelValues("capacity").Inc()
			return "", ErrReviewCapacity
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultReviewTimeout)
		defer cancel()
		u, err := c.inner.Review(rctx, token)
		switch {
		case errors.Is(err, ErrUnauthenticated):
			c.metrics.reviews.WithLabelValues("refused").Inc()
			c.storeRefusal(key)
			return "", err
		case err != nil:
			c.metrics.reviews.WithLabelValues("error").Inc()
			return "", err
		}
		c.metrics.reviews.WithLabelValues("accepted").Inc()
		c.store(key, u, token)
		return u, nil
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return "", res.Err
		}
		return res.Val.(string), nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (c *CachingTokenReviewer) lookup(key [sha256.Size]byte) (reviewEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return reviewEntry{}, false
	}
	if !c.now().Before(e.expires) {
		delete(c.entries, key)
		return reviewEntry{}, false
	}
	return e, true
}

// storeRefusal remembers a refused token for refusalTTL.
func (c *CachingTokenReviewer) storeRefusal(key [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(key, reviewEntry{refused: true, expires: c.now().Add(refusalTTL)})
}

// store caches an accepted review until the earlier of now+TTL and the
// token's exp; a token without a readable exp, or one already expired by the
// proxy's clock, is not cached.
func (c *CachingTokenReviewer) store(key [sha256.Size]byte, username, token string) {
	if c.ttl <= 0 {
		return
	}
	exp, ok := jwtExpiry(token)
	now := c.now()
	if !ok || !exp.After(now) {
		return
	}
	expires := now.Add(c.ttl)
	if exp.Before(expires) {
		expires = exp
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(key, reviewEntry{username: username, expires: expires})
}

// put adds an entry, making room first when the cache is full: expired
// entries go first, then arbitrary ones. Callers hold mu.
func (c *CachingTokenReviewer) put(key [sha256.Size]byte, e reviewEntry) {
	if len(c.entries) >= c.max {
		now := c.now()
		for k, old := range c.entries {
			if !now.Before(old.expires) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < c.max {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[key] = e
}

// maxJWTLen bounds the token jwtExpiry looks at.
const maxJWTLen = 16 << 10

// maxExp is the largest exp jwtExpiry accepts (the year 5138); anything
// larger is treated as unreadable.
const maxExp = 1e11

// jwtExpiry reads the exp claim (seconds since the epoch) from a JWT's
// payload without verifying anything: the result may only shorten a cache
// entry. It reports false when the token is not a three-part JWT, its payload
// is not base64url JSON, or exp is missing, not a positive number, or absurd.
func jwtExpiry(token string) (time.Time, bool) {
	if len(token) > maxJWTLen || strings.Count(token, ".") != 2 {
		return time.Time{}, false
	}
	payload := strings.Split(token, ".")[1]
	raw, err := base64.RawURLEncoding.Strict().DecodeString(payload)
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp json.RawMessage `json:"exp"`
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		return time.Time{}, false
	}
	num := bytes.TrimSpace(claims.Exp)
	if len(num) == 0 || num[0] < '0' || num[0] > '9' {
		return time.Time{}, false // missing, null, a string, negative
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil || f <= 0 || f > maxExp || math.IsNaN(f) {
		return time.Time{}, false
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true
}
