package ocisign

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/sigstore/sigstore-go/pkg/testing/ca"
)

// testRoot is a virtual Sigstore's trusted material, for options that
// require a root.
func testRoot(t *testing.T) *ca.VirtualSigstore {
	t.Helper()
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// The keyless signer has the shape internal/release's Signer and the
// attestation signer expect.
var _ interface {
	Bundle(ctx context.Context, statement []byte) ([]byte, error)
} = (*KeylessSigner)(nil)

type staticTokens struct {
	token string
	err   error
}

func (s staticTokens) Token(context.Context) (string, error) { return s.token, s.err }

func TestNewKeylessSigner(t *testing.T) {
	vs := testRoot(t)
	if _, err := NewKeylessSigner(KeylessOptions{TrustedRoot: vs}); err == nil {
		t.Error("no token source accepted")
	}
	if _, err := NewKeylessSigner(KeylessOptions{Tokens: staticTokens{}}); err == nil {
		t.Error("no trusted root accepted")
	}
	if _, err := NewKeylessSigner(KeylessOptions{Tokens: staticTokens{}, TrustedRoot: vs, FulcioURL: "http://fulcio.example"}); err == nil {
		t.Error("an http Fulcio accepted")
	}
	if _, err := NewKeylessSigner(KeylessOptions{Tokens: staticTokens{}, TrustedRoot: vs, RekorURL: "http://rekor.example"}); err == nil {
		t.Error("an http Rekor accepted")
	}
	s, err := NewKeylessSigner(KeylessOptions{Tokens: staticTokens{}, TrustedRoot: vs})
	if err != nil || s.fulcio != PublicGoodFulcio || s.rekor != PublicGoodRekor {
		t.Errorf("defaults: %+v, %v", s, err)
	}
}

func TestKeylessSignerNeedsToken(t *testing.T) {
	s, err := NewKeylessSigner(KeylessOptions{Tokens: staticTokens{err: ErrNoGitHubToken}, TrustedRoot: testRoot(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Bundle(context.Background(), []byte("{}")); !errors.Is(err, ErrNoGitHubToken) {
		t.Errorf("Bundle without a token: %v", err)
	}
}

// TestKeylessSignerFulcioErrors runs the signer against a TLS stand-in for
// Fulcio: an error answer reaches the caller quoted, bounded and without the
// token, and a redirect is refused before the token can follow it.
func TestKeylessSignerFulcioErrors(t *testing.T) {
	target, hits := tokenServer(t, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "should not be reached", http.StatusTeapot)
	})
	cases := map[string]struct {
		handle  http.HandlerFunc
		wantErr string
	}{
		"refused, echoing the token": {
			handle: func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "bad token "+testJWT+"\x1b[31m"+strings.Repeat("x", 2000), http.StatusUnauthorized)
			},
			wantErr: "401",
		},
		"redirect": {
			handle: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target.URL+r.URL.Path, http.StatusTemporaryRedirect)
			},
			wantErr: "redirect (307), not followed",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			fulcio, requests := tokenServer(t, c.handle)
			s, err := NewKeylessSigner(KeylessOptions{Tokens: staticTokens{token: testJWT}, FulcioURL: fulcio.URL, TrustedRoot: testRoot(t)})
			if err != nil {
				t.Fatal(err)
			}
			s.transport = fulcio.Client().Transport
			_, err = s.Bundle(context.Background(), []byte(`{"_type":"https://in-toto.io/Statement/v1"}`))
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("Bundle: %v, want an error with %q", err, c.wantErr)
			}
			if requests.Load() == 0 {
				t.Fatal("Fulcio was never asked")
			}
			msg := err.Error()
			if strings.Contains(msg, testJWT) || strings.ContainsRune(msg, '\x1b') || len(msg) > 400 {
				t.Errorf("error is raw, unbounded or carries the token: %q", msg)
			}
		})
	}
	if hits.Load() != 0 {
		t.Errorf("a redirect from Fulcio was followed (%d requests)", hits.Load())
	}
}
