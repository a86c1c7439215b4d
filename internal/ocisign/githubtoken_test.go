package ocisign

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

const (
	testRequestToken = "request-token-6f1d"
	testJWT          = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJyZXBvOmFya2FkaXVzcy9vcGVuZmllZiJ9.c2lnbmF0dXJl"
)

// tokenServer is a TLS stand-in for the runner's token endpoint that answers
// with handle and counts requests.
func tokenServer(t *testing.T, handle http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		handle(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func newTestTokenSource(t *testing.T, srv *httptest.Server, path string) *GitHubTokenSource {
	t.Helper()
	g, err := NewGitHubTokenSource(srv.URL+path, testRequestToken, srv.Client().Transport)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGitHubTokenSourceFetchesSigstoreToken(t *testing.T) {
	srv, _ := tokenServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "bearer "+testRequestToken {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		if r.URL.Query().Get("audience") != SigstoreAudience || r.URL.Query().Get("api-version") != "2.0" {
			http.Error(w, "wrong query", http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"value": testJWT})
	})
	// The runner's URL carries its own query; the audience is added to it.
	got, err := newTestTokenSource(t, srv, "/token?api-version=2.0&audience=other").Token(context.Background())
	if err != nil || got != testJWT {
		t.Fatalf("Token() = %q, %v; want the JWT", got, err)
	}
}

func TestGitHubTokenSourceFailsClosed(t *testing.T) {
	big := strings.Repeat("a", maxTokenResponse)
	cases := map[string]struct {
		handle  http.HandlerFunc
		wantErr string
	}{
		"refused": {
			handle:  func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "token "+testJWT, http.StatusForbidden) },
			wantErr: "answered 403",
		},
		"server error": {
			handle:  func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) },
			wantErr: "answered 500",
		},
		"larger than the bound": {
			handle: func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(`{"value":"` + big + `"}`))
			},
			wantErr: "larger than",
		},
		"not JSON": {
			handle:  func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>" + testJWT)) },
			wantErr: "not the expected JSON",
		},
		"not a JWT": {
			handle:  func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"value":"a.b"}`)) },
			wantErr: "no JWT",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			srv, _ := tokenServer(t, c.handle)
			got, err := newTestTokenSource(t, srv, "/token").Token(context.Background())
			if err == nil || got != "" || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("Token() = %q, %v; want an error with %q", got, err, c.wantErr)
			}
			if strings.Contains(err.Error(), testRequestToken) || strings.Contains(err.Error(), testJWT) {
				t.Errorf("the error carries a token: %v", err)
			}
		})
	}
}

// TestGitHubTokenSourceRefusesRedirect: a redirect is an error, and the
// bearer token never reaches the redirect's target.
func TestGitHubTokenSourceRefusesRedirect(t *testing.T) {
	target, hits := tokenServer(t, func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"value": testJWT})
	})
	srv, _ := tokenServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/token", http.StatusFound)
	})
	got, err := newTestTokenSource(t, srv, "/token").Token(context.Background())
	if err == nil || got != "" || !strings.Contains(err.Error(), "answered 302") {
		t.Fatalf("Token() = %q, %v; want the redirect refused", got, err)
	}
	if hits.Load() != 0 {
		t.Errorf("the redirect was followed (%d requests to its target)", hits.Load())
	}
}

func TestGitHubTokenSourceConfig(t *testing.T) {
	t.Setenv(githubTokenURLEnv, "")
	t.Setenv(githubTokenRequestEnv, "")
	if _, err := GitHubTokenSourceFromEnv(); !errors.Is(err, ErrNoGitHubToken) {
		t.Errorf("outside a job: %v, want ErrNoGitHubToken", err)
	}
	t.Setenv(githubTokenURLEnv, "https://runner.example/token?api-version=2.0")
	t.Setenv(githubTokenRequestEnv, testRequestToken)
	if _, err := GitHubTokenSourceFromEnv(); err != nil {
		t.Errorf("in a job: %v", err)
	}
	for _, u := range []string{"http://runner.example/token", "https://user:pw@runner.example/", "runner.example/token", "https://"} {
		if _, err := NewGitHubTokenSource(u, testRequestToken, nil); err == nil {
			t.Errorf("request URL %q accepted, want only https without credentials", u)
		}
	}
}

func FuzzParseGitHubTokenResponse(f *testing.F) {
	f.Add([]byte(`{"value":"` + testJWT + `"}`))
	f.Add([]byte(`{"value":"a..c"}`))
	f.Add([]byte(`{"value":1}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		tok, err := ParseGitHubTokenResponse(body)
		if err != nil {
			if tok != "" {
				t.Fatal("a token with an error")
			}
			// The errors are fixed sentences: nothing of the input is quoted.
			if msg := err.Error(); msg != "GitHub OIDC token response is not the expected JSON object" && msg != "GitHub OIDC token response holds no JWT" {
				t.Fatalf("unexpected error %q", msg)
			}
			return
		}
		if strings.Count(tok, ".") != 2 {
			t.Fatalf("accepted %q, not three parts", tok)
		}
		again, err := json.Marshal(map[string]string{"value": tok})
		if err != nil {
			t.Fatal(err)
		}
		if back, err := ParseGitHubTokenResponse(again); err != nil || back != tok {
			t.Fatalf("round trip: %q, %v", back, err)
		}
	})
}
