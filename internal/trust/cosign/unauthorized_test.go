package cosign

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestVerifyRegistryUnauthorized checks that a registry refusing the read
// (401 or 403, on the read or on its token endpoint) wraps both
// ErrRegistryUnauthorized and ErrRegistryUnavailable and keeps the status,
// while any other failure is only unavailable.
func TestVerifyRegistryUnauthorized(t *testing.T) {
	k := cosigntest.NewKeyless(t, testIssuer, testSubject)
	const denied = `{"errors":[{"code":"DENIED","message":"secret body"}]}`

	// answering serves every request with status and a challenge header.
	answering := func(status int, challenge string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if challenge != "" {
				w.Header().Set("WWW-Authenticate", challenge)
			}
			http.Error(w, denied, status)
		}
	}
	// tokenFlow is a registry of the distribution token flow whose token
	// endpoint answers status to the anonymous request; it counts the
	// token requests.
	var tokenRequests atomic.Int64
	tokenFlow := func(status int) func(host string) http.HandlerFunc {
		return func(host string) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/token" {
					tokenRequests.Add(1)
					http.Error(w, `{"details":"secret body"}`, status)
					return
				}
				w.Header().Set("WWW-Authenticate", `Bearer realm="http://`+host+`/token",service="test"`)
				http.Error(w, denied, http.StatusUnauthorized)
			}
		}
	}
	for name, tc := range map[string]struct {
		handler      func(host string) http.HandlerFunc
		status       int
		unauthorized bool
		token        bool // the refusal comes from the token endpoint
	}{
		"401 basic challenge": {
			handler:      func(string) http.HandlerFunc { return answering(http.StatusUnauthorized, `Basic realm="test"`) },
			status:       http.StatusUnauthorized,
			unauthorized: true,
		},
		"401 without a challenge": {
			handler:      func(string) http.HandlerFunc { return answering(http.StatusUnauthorized, "") },
			status:       http.StatusUnauthorized,
			unauthorized: true,
		},
		"403": {
			handler:      func(string) http.HandlerFunc { return answering(http.StatusForbidden, "") },
			status:       http.StatusForbidden,
			unauthorized: true,
		},
		"token endpoint 401": {handler: tokenFlow(http.StatusUnauthorized), status: http.StatusUnauthorized, unauthorized: true, token: true},
		"token endpoint 403": {handler: tokenFlow(http.StatusForbidden), status: http.StatusForbidden, unauthorized: true, token: true},
		"500": {
			handler: func(string) http.HandlerFunc { return answering(http.StatusInternalServerError, "") },
			status:  http.StatusInternalServerError,
		},
		"503": {
			handler: func(string) http.HandlerFunc { return answering(http.StatusServiceUnavailable, "") },
			status:  http.StatusServiceUnavailable,
		},
	} {
		t.Run(name, func(t *testing.T) {
			var h http.Handler
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
			defer srv.Close()
			host := strings.TrimPrefix(srv.URL, "http://")
			h = tc.handler(host)
			ref := mustRef(t, host+"/plugins/fx@sha256:"+strings.Repeat("ab", 32))
			before := tokenRequests.Load()
			checkRefused(t, newVerifier(t, k), ref, tc.status, tc.unauthorized)
			if tc.token && tokenRequests.Load() == before {
				t.Error("the token endpoint was never asked")
			}
		})
	}

	// The listing works; the bundle's blob is refused.
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		t.Run("bundle blob "+http.StatusText(status)+" after listing", func(t *testing.T) {
			reg := cosigntest.NewRegistry(t, true)
			ref := reg.PushImage(t, "plugins/fx", nil)
			reg.Sign(t, ref, k)
			v := newVerifier(t, k, WithTransport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
				if strings.Contains(req.URL.Path, "/blobs/") {
					return &http.Response{StatusCode: status, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
				}
				return http.DefaultTransport.RoundTrip(req)
			})))
			checkRefused(t, v, ref, status, true)
		})
	}
}

// checkRefused checks that Verify fails with a *RegistryError of status that
// wraps ErrRegistryUnavailable, and ErrRegistryUnauthorized when
// unauthorized, without the registry's body in its text.
func checkRefused(t *testing.T, v *Verifier, ref plugins.ImageRef, status int, unauthorized bool) {
	t.Helper()
	checkUnavailable(t, v, ref, status)
	_, _, err := v.Verify(context.Background(), ref)
	if got := errors.Is(err, ErrRegistryUnauthorized); got != unauthorized {
		t.Errorf("errors.Is(%v, ErrRegistryUnauthorized) = %t, want %t", err, got, unauthorized)
	}
	var re *RegistryError
	if errors.As(err, &re) && re.Unauthorized() != unauthorized {
		t.Errorf("Unauthorized() = %t, want %t", re.Unauthorized(), unauthorized)
	}
	if err != nil && strings.Contains(err.Error(), "secret body") {
		t.Errorf("the error quotes the registry's body: %v", err)
	}
}
