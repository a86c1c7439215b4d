package cosign

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestVerifyTokenRegistry reads a registry that requires a bearer token from
// a token endpoint on another loopback server, the distribution token flow,
// and redirects blob reads to a third: anonymous and wrong
// credentials are refused as RegistryUnauthorized, the right ones from a
// docker config file verify. go-containerregistry sends the registry's basic
// credentials to the token endpoint the registry's challenge names (the
// realm), and the token only to the registry; the blob store receives
// neither, and credentials configured for another host are never sent.
func TestVerifyTokenRegistry(t *testing.T) {
	k := cosigntest.NewKeyless(t, testIssuer, testSubject)
	reg := cosigntest.NewTokenRegistry(t, "alice", privatePassword)
	ref := reg.PushImage(t, "plugins/fx", map[string]string{"x": "y"})
	reg.Sign(t, ref, k)
	reg.Lock()

	noSecret := func(t *testing.T, err error) {
		t.Helper()
		if err != nil && strings.Contains(err.Error(), privatePassword) {
			t.Errorf("the error holds the password: %v", err)
		}
	}
	keychain := func(t *testing.T, user, password string, hosts ...string) Option {
		t.Helper()
		kc, err := NewFileKeychain(cosigntest.DockerConfig(t, user, password, hosts...))
		if err != nil {
			t.Fatal(err)
		}
		return WithKeychain(kc)
	}

	t.Run("anonymous", func(t *testing.T) {
		before := reg.TokenAuthorized()
		_, _, err := newVerifier(t, k).Verify(context.Background(), ref)
		if !errors.Is(err, ErrRegistryUnauthorized) {
			t.Fatalf("err = %v, want ErrRegistryUnauthorized", err)
		}
		if n := reg.TokenAuthorized() - before; n != 0 {
			t.Fatalf("the token endpoint received credentials on %d anonymous requests", n)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		before := reg.TokenRequests()
		_, _, err := newVerifier(t, k, keychain(t, "alice", "wrong", reg.Host)).Verify(context.Background(), ref)
		if !errors.Is(err, ErrRegistryUnauthorized) {
			t.Fatalf("err = %v, want ErrRegistryUnauthorized", err)
		}
		if reg.TokenRequests() == before {
			t.Fatal("the token endpoint was not asked; the token flow is not under test")
		}
		noSecret(t, err)
	})
	t.Run("credentials for other hosts", func(t *testing.T) {
		// Configured for an unrelated host, for the token endpoint and for
		// the blob store, but not for the registry: nothing is sent.
		before := reg.TokenAuthorized()
		opt := keychain(t, "alice", privatePassword, "registry.example.com", reg.RealmHost(), reg.TokenHost(), reg.StoreHost())
		_, _, err := newVerifier(t, k, opt).Verify(context.Background(), ref)
		if !errors.Is(err, ErrRegistryUnauthorized) {
			t.Fatalf("err = %v, want ErrRegistryUnauthorized", err)
		}
		if n := reg.TokenAuthorized() - before; n != 0 {
			t.Fatalf("the token endpoint received credentials not configured for the registry on %d requests", n)
		}
		noSecret(t, err)
	})
	t.Run("right credentials, blobs redirected", func(t *testing.T) {
		issued, stored := reg.TokensIssued(), reg.StoreRequests()
		got, _ := mustVerify(t, newVerifier(t, k, keychain(t, "alice", privatePassword, reg.Host)), ref)
		if len(got.Signatures) != 1 {
			t.Fatalf("signatures = %v", got.Signatures)
		}
		if reg.TokenAuthorized() == 0 {
			t.Fatal("the token endpoint named by the registry's challenge did not receive the registry's credentials")
		}
		if reg.TokensIssued() == issued {
			t.Fatal("no token was issued; the token flow is not under test")
		}
		if reg.StoreRequests() == stored {
			t.Fatal("no blob read went to the blob store; the redirect is not under test")
		}
		if n := reg.StoreAuthorized(); n != 0 {
			t.Fatalf("the blob store received an Authorization header (basic or bearer) on %d requests", n)
		}
	})
	t.Run("a realm at a loopback address is not asked", func(t *testing.T) {
		// A challenge naming a token endpoint at a private or loopback IP
		// other than the registry's host:port (as an attacker's registry
		// would, to reach a cluster-internal service with the registry's
		// credentials) is refused before any request: no verification, no
		// credentials sent.
		defer reg.SetRealmHost(reg.RealmHost())
		reg.SetRealmHost(reg.TokenHost())
		before := reg.TokenRequests()
		_, _, err := newVerifier(t, k, keychain(t, "alice", privatePassword, reg.Host)).Verify(context.Background(), ref)
		if err == nil {
			t.Fatal("verified through a realm at a loopback address")
		}
		if n := reg.TokenRequests() - before; n != 0 {
			t.Fatalf("the token endpoint at %s was asked %d times", reg.TokenHost(), n)
		}
		noSecret(t, err)
	})
}
