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

	"github.com/prometheus/client_golang/prometheus/testutil"
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
		exp        string        // the exp claim, "" for none
		cachedFor  time.Duration // how long the entry must last
		neverCache bool
	}{
		"an hour left: five minutes": {exp: "1800003600", cachedFor: MaxReviewCacheTTL},
		"a minute left: until exp":   {exp: "1800000060", cachedFor: time.Minute},
		"fractional exp":             {exp: "1800000030.5", cachedFor: 30*time.Second + 500*time.Millisecond},
		"no exp: never cached":       {neverCache: true},
		"expired by our clock":       {exp: "1799999999", neverCache: true},
		"exp as a string":            {exp: `"1800003600"`, neverCache: true},
		"negative exp":               {exp: "-1", neverCache: true},
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
			review := func() {
				t.Helper()
				u, err := r.Review(context.Background(), token)
				if err != nil || u != "system:serviceaccount:openfief:plugin-x" {
					t.Fatalf("Review = %q, %v", u, err)
				}
			}
			review()
			review()
			if c.neverCache {
				if n := inner.calls.Load(); n != 2 {
					t.Fatalf("inner calls = %d, want 2 (not cached)", n)
				}
				return
			}
			if n := inner.calls.Load(); n != 1 {
				t.Fatalf("inner calls = %d, want 1 (cached)", n)
			}
			clock.Advance(c.cachedFor - time.Millisecond)
			review()
			if n := inner.calls.Load(); n != 1 {
				t.Fatalf("just before the end: inner calls = %d, want 1", n)
			}
			clock.Advance(time.Millisecond)
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
	r.Review(context.Background(), token)
	clock.Advance(MaxReviewCacheTTL)
	r.Review(context.Background(), token)
	if n := inner.calls.Load(); n != 2 {
		t.Fatalf("inner calls = %d, want 2: the TTL must be capped at five minutes", n)
	}
}

func TestCachingReviewerRefusalsNotCached(t *testing.T) {
	inner := &countingReviewer{refuse: true}
	r := NewCachingTokenReviewer(inner)
	token := jwt(`{"exp":9999999999}`)
	for range 3 {
		if _, err := r.Review(context.Background(), token); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("err = %v, want ErrUnauthenticated", err)
		}
	}
	if n := inner.calls.Load(); n != 3 {
		t.Fatalf("inner calls = %d, want 3", n)
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
	if hits := testutil.ToFloat64(metrics.reviewCache.WithLabelValues("hit")); hits < 1 {
		t.Errorf("cache hits = %v", hits)
	}
	if got := testutil.ToFloat64(metrics.reviews.WithLabelValues("accepted")); got != 1 {
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
		r.Review(context.Background(), jwt(fmt.Sprintf(`{"exp":1800003600,"jti":"%d"}`, i)))
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
