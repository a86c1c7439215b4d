package egress

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/arkadiuss/openfief/internal/testutil"
)

// jwt builds an unsigned JWT-shaped token with the given payload JSON.
func jwt(payload string) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"RS256","kid":"k"}`)) + "." + enc.EncodeToString([]byte(payload)) + ".c2ln"
}

// countingReviewer accepts every token with a fixed username, or refuses
// them all, counting calls; release, if set, holds each call until closed.
type countingReviewer struct {
	calls   atomic.Int64
	refuse  bool
	release chan struct{}
}

func (c *countingReviewer) Review(ctx context.Context, token string) (string, error) {
	c.calls.Add(1)
	if c.release != nil {
		select {
		case <-c.release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if c.refuse {
		return "", fmt.Errorf("refused: %w", ErrUnauthenticated)
	}
	return "system:serviceaccount:openfief:plugin-x", nil
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

var epoch = time.Unix(1_800_000_000, 0)

func TestCachingReviewerLifetime(t *testing.T) {
	cases := map[string]struct {
		exp       string        // the exp claim, "" for none
		cachedFor time.Duration // how long the entry must last
		// endsAtExp: the entry ends because the token expires, so the
		// token is then refused without a review.
		endsAtExp bool
		// refusedUnreviewed: the pre-check refuses the token, and the
		// API server is never asked.
		refusedUnreviewed bool
	}{
		"an hour left: five minutes": {exp: "1800003600", cachedFor: MaxReviewCacheTTL},
		"a minute left: until exp":   {exp: "1800000060", cachedFor: time.Minute, endsAtExp: true},
		"fractional exp":             {exp: "1800000030.5", cachedFor: 30*time.Second + 500*time.Millisecond, endsAtExp: true},
		"no exp: refused unreviewed": {refusedUnreviewed: true},
		"expired by our clock":       {exp: "1799999999", refusedUnreviewed: true},
		"exp as a string":            {exp: `"1800003600"`, refusedUnreviewed: true},
		"negative exp":               {exp: "-1", refusedUnreviewed: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			clock := &fakeClock{now: epoch}
			inner := &countingReviewer{}
			r := NewCachingTokenReviewer(inner, WithClock(clock.Now))
			payload := `{"sub":"system:serviceaccount:openfief:plugin-x","aud":["openfief-egress"]}`
			if c.exp != "" {
				payload = `{"exp":` + c.exp + `,"sub":"x"}`
			}
			token := jwt(payload)
			if c.refusedUnreviewed {
				for range 2 {
					if _, err := r.Review(context.Background(), token); !errors.Is(err, ErrUnauthenticated) {
						t.Fatalf("Review: %v, want ErrUnauthenticated", err)
					}
				}
				if n := inner.calls.Load(); n != 0 {
					t.Fatalf("inner calls = %d, want 0", n)
				}
				return
			}
			review := func() {
				t.Helper()
				u, err := r.Review(context.Background(), token)
				if err != nil || u != "system:serviceaccount:openfief:plugin-x" {
					t.Fatalf("Review = %q, %v", u, err)
				}
			}
			review()
			review()
			if n := inner.calls.Load(); n != 1 {
				t.Fatalf("inner calls = %d, want 1 (cached)", n)
			}
			clock.Advance(c.cachedFor - time.Millisecond)
			review()
			if n := inner.calls.Load(); n != 1 {
				t.Fatalf("just before the end: inner calls = %d, want 1", n)
			}
			clock.Advance(time.Millisecond)
			if c.endsAtExp {
				if _, err := r.Review(context.Background(), token); !errors.Is(err, ErrUnauthenticated) || inner.calls.Load() != 1 {
					t.Fatalf("at exp: %v after %d inner calls, want ErrUnauthenticated after 1", err, inner.calls.Load())
				}
				return
			}
			review()
			if n := inner.calls.Load(); n != 2 {
				t.Fatalf("at the end: inner calls = %d, want 2", n)
			}
		})
	}
}

func TestCachingReviewerTTLCappedAtFiveMinutes(t *testing.T) {
	clock := &fakeClock{now: epoch}
	inner := &countingReviewer{}
	r := NewCachingTokenReviewer(inner, WithClock(clock.Now), WithCacheTTL(time.Hour))
	token := jwt(`{"exp":1800086400}`)
	if _, err := r.Review(context.Background(), token); err != nil {
		t.Fatal(err)
	}
	clock.Advance(MaxReviewCacheTTL)
	if _, err := r.Review(context.Background(), token); err != nil {
		t.Fatal(err)
	}
	if n := inner.calls.Load(); n != 2 {
		t.Fatalf("inner calls = %d, want 2: the TTL must be capped at five minutes", n)
	}
}

// TestCachingReviewerRefusalsCachedBriefly: a refused token is answered
// from the cache for refusalTTL, then reviewed again; errors that are not
// refusals are never cached.
func TestCachingReviewerRefusalsCachedBriefly(t *testing.T) {
	clock := &fakeClock{now: epoch}
	inner := &countingReviewer{refuse: true}
	r := NewCachingTokenReviewer(inner, WithClock(clock.Now))
	token := jwt(`{"exp":9999999999}`)
	for range 3 {
		if _, err := r.Review(context.Background(), token); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("err = %v, want ErrUnauthenticated", err)
		}
	}
	if n := inner.calls.Load(); n != 1 {
		t.Fatalf("inner calls = %d, want 1", n)
	}
	clock.Advance(refusalTTL)
	if _, err := r.Review(context.Background(), token); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("after %v: err = %v, want ErrUnauthenticated", refusalTTL, err)
	}
	if n := inner.calls.Load(); n != 2 {
		t.Fatalf("after %v: inner calls = %d, want 2", refusalTTL, n)
	}

	failing := &erroringReviewer{}
	r = NewCachingTokenReviewer(failing, WithClock(clock.Now))
	for range 3 {
		if _, err := r.Review(context.Background(), token); err == nil || errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("err = %v, want the reviewer's error", err)
		}
	}
	if n := failing.calls.Load(); n != 3 {
		t.Fatalf("failed reviews: inner calls = %d, want 3 (never cached)", n)
	}
}

// erroringReviewer fails every review without refusing the token.
type erroringReviewer struct{ calls atomic.Int64 }

func (e *erroringReviewer) Review(context.Context, string) (string, error) {
	e.calls.Add(1)
	return "", errors.New("API server unavailable")
}

// TestMadeUpTokensCostNoReviews is a regression test:
// 300 clients with made-up tokens that hung up at once left 300 reviews in
// flight at the API server. Now a token that is not a JWT with a future exp
// is refused unreviewed, and distinct well-formed tokens run at most
// WithMaxReviewsInFlight reviews at once; the rest fail fast.
func TestMadeUpTokensCostNoReviews(t *testing.T) {
	inner := &countingReviewer{release: make(chan struct{})}
	metrics, _ := NewMetrics(nil)
	r := NewCachingTokenReviewer(inner, WithMaxReviewsInFlight(4), WithReviewMetrics(metrics))
	for i := range 300 {
		if _, err := r.Review(context.Background(), fmt.Sprintf("made-up-%d", i)); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("made-up token: %v, want ErrUnauthenticated", err)
		}
	}
	if n := inner.calls.Load(); n != 0 {
		t.Fatalf("made-up tokens: %d reviews, want 0", n)
	}

	const clients = 50
	var wg sync.WaitGroup
	var capacity atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	for i := range clients {
		wg.Go(func() {
			_, err := r.Review(ctx, jwt(fmt.Sprintf(`{"exp":9999999999,"jti":"%d"}`, i)))
			if errors.Is(err, ErrReviewCapacity) {
				capacity.Add(1)
			}
		})
	}
	testutil.Eventually(t, 5*time.Second, "4 reviews in flight, the rest refused", func() (bool, string) {
		return inner.calls.Load() == 4 && capacity.Load() == clients-4,
			fmt.Sprintf("%d reviews, %d refused for capacity", inner.calls.Load(), capacity.Load())
	})
	cancel() // the clients hang up; the 4 reviews still finish, nothing else starts
	wg.Wait()
	close(inner.release)
	if n := inner.calls.Load(); n != 4 {
		t.Fatalf("%d reviews started, want 4", n)
	}
	if got := promtestutil.ToFloat64(metrics.reviews.WithLabelValues("malformed")); got != 300 {
		t.Errorf("malformed = %v, want 300", got)
	}
}

func TestCachingReviewerCoalesces(t *testing.T) {
	metrics, _ := NewMetrics(nil)
	inner := &countingReviewer{release: make(chan struct{})}
	r := NewCachingTokenReviewer(inner, WithReviewMetrics(metrics))
	token := jwt(`{"exp":9999999999}`)
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			if _, err := r.Review(context.Background(), token); err != nil {
				errs <- err
			}
		})
	}
	// Let every caller reach the shared call, then let it answer.
	time.Sleep(100 * time.Millisecond)
	close(inner.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if c := inner.calls.Load(); c != 1 {
		t.Fatalf("inner calls = %d, want 1", c)
	}
	if _, err := r.Review(context.Background(), token); err != nil {
		t.Fatal(err)
	}
	if c := inner.calls.Load(); c != 1 {
		t.Fatalf("a cached review called the reviewer: %d calls", c)
	}
	if hits := promtestutil.ToFloat64(metrics.reviewCache.WithLabelValues("hit")); hits < 1 {
		t.Errorf("cache hits = %v", hits)
	}
	if got := promtestutil.ToFloat64(metrics.reviews.WithLabelValues("accepted")); got != 1 {
		t.Errorf("accepted reviews = %v, want 1", got)
	}
}

// TestCachingReviewerCallerGivesUp: a caller whose context ends gets its
// error, and the shared review still completes for the others.
func TestCachingReviewerCallerGivesUp(t *testing.T) {
	inner := &countingReviewer{release: make(chan struct{})}
	r := NewCachingTokenReviewer(inner)
	token := jwt(`{"exp":9999999999}`)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { _, err := r.Review(ctx, token); done <- err }()
	second := make(chan error)
	go func() { _, err := r.Review(context.Background(), token); second <- err }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v", err)
	}
	close(inner.release)
	if err := <-second; err != nil {
		t.Fatalf("other caller: %v", err)
	}
	if c := inner.calls.Load(); c != 1 {
		t.Fatalf("inner calls = %d, want 1", c)
	}
}

func TestCachingReviewerBounded(t *testing.T) {
	clock := &fakeClock{now: epoch}
	r := NewCachingTokenReviewer(&countingReviewer{}, WithClock(clock.Now), WithCacheSize(3))
	for i := range 10 {
		if _, err := r.Review(context.Background(), jwt(fmt.Sprintf(`{"exp":1800003600,"jti":"%d"}`, i))); err != nil {
			t.Fatal(err)
		}
		if n := len(r.entries); n > 3 {
			t.Fatalf("%d entries, want at most 3", n)
		}
	}
	for k := range r.entries {
		if len(k) != 32 {
			t.Fatal("entries are not keyed by a SHA-256")
		}
	}
}

func TestJWTExpiry(t *testing.T) {
	cases := map[string]struct {
		token string
		want  int64 // 0: none
	}{
		"integer":           {jwt(`{"exp":1800000000}`), 1800000000},
		"float":             {jwt(`{"exp":1.8e9}`), 1800000000},
		"no exp":            {jwt(`{"sub":"a"}`), 0},
		"null":              {jwt(`{"exp":null}`), 0},
		"string":            {jwt(`{"exp":"1800000000"}`), 0},
		"zero":              {jwt(`{"exp":0}`), 0},
		"negative":          {jwt(`{"exp":-5}`), 0},
		"absurd":            {jwt(`{"exp":1e300}`), 0},
		"array payload":     {jwt(`[1]`), 0},
		"not JSON":          {jwt(`exp=1`), 0},
		"two parts":         {"a.b", 0},
		"four parts":        {"a.b.c.d", 0},
		"padded base64":     {"e30." + base64.URLEncoding.EncodeToString([]byte(`{"exp":1800000000,"a":12}`)) + ".x", 0},
		"standard alphabet": {"e30." + base64.StdEncoding.EncodeToString([]byte(`{"exp":1800000000,"x":"??>"}`)) + ".x", 0},
		"empty":             {"", 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := jwtExpiry(c.token)
			if c.want == 0 {
				if ok {
					t.Fatalf("got %v, want none", got)
				}
				return
			}
			if !ok || got.Unix() != c.want {
				t.Fatalf("got %v %v, want %d", got.Unix(), ok, c.want)
			}
		})
	}
}

func FuzzJWTExpiry(f *testing.F) {
	f.Add(jwt(`{"exp":1800000000}`))
	f.Add(jwt(`{"exp":1.5e9,"exp":2}`))
	f.Add("a.b.c")
	f.Add("..")
	f.Fuzz(func(t *testing.T, token string) {
		exp, ok := jwtExpiry(token)
		if ok && (exp.Unix() <= 0 || exp.Unix() > maxExp) {
			t.Fatalf("accepted exp %v", exp)
		}
	})
}
