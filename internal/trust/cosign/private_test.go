package cosign

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

const privatePassword = "pa55-s3cret-Zq9" // must never appear in an error

// TestVerifyPrivateRegistry reads a registry that requires basic auth and
// redirects blob reads to a second loopback server: anonymous
// and wrong credentials are refused as RegistryUnauthorized, the right ones
// from a docker config file verify, the redirect target never sees them, and
// the file is read again when it changes.
func TestVerifyPrivateRegistry(t *testing.T) {
	k := cosigntest.NewKeyless(t, testIssuer, testSubject)
	reg := cosigntest.NewPrivateRegistry(t, "alice", privatePassword)
	ref := reg.PushImage(t, "plugins/fx", map[string]string{"x": "y"})
	reg.Sign(t, ref, k)
	reg.Lock()

	noSecret := func(t *testing.T, err error) {
		t.Helper()
		if err != nil && strings.Contains(err.Error(), privatePassword) {
			t.Errorf("the error holds the password: %v", err)
		}
	}

	t.Run("anonymous", func(t *testing.T) {
		_, _, err := newVerifier(t, k).Verify(context.Background(), ref)
		if !errors.Is(err, ErrRegistryUnauthorized) {
			t.Fatalf("err = %v, want ErrRegistryUnauthorized", err)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		kc, err := NewFileKeychain(cosigntest.DockerConfig(t, "alice", "wrong", reg.Host))
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = newVerifier(t, k, WithKeychain(kc)).Verify(context.Background(), ref)
		if !errors.Is(err, ErrRegistryUnauthorized) {
			t.Fatalf("err = %v, want ErrRegistryUnauthorized", err)
		}
		noSecret(t, err)
	})
	t.Run("credentials for another registry", func(t *testing.T) {
		kc, err := NewFileKeychain(cosigntest.DockerConfig(t, "alice", privatePassword, "registry.example.com"))
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = newVerifier(t, k, WithKeychain(kc)).Verify(context.Background(), ref)
		if !errors.Is(err, ErrRegistryUnauthorized) {
			t.Fatalf("err = %v, want ErrRegistryUnauthorized", err)
		}
	})
	t.Run("right credentials, blobs redirected", func(t *testing.T) {
		kc, err := NewFileKeychain(cosigntest.DockerConfig(t, "alice", privatePassword, reg.Host))
		if err != nil {
			t.Fatal(err)
		}
		before := reg.StoreRequests()
		got, _ := mustVerify(t, newVerifier(t, k, WithKeychain(kc)), ref)
		if len(got.Signatures) != 1 {
			t.Fatalf("signatures = %v", got.Signatures)
		}
		if reg.StoreRequests() == before {
			t.Fatal("no blob read went to the blob store; the redirect is not under test")
		}
		if n := reg.StoreAuthorized(); n != 0 {
			t.Fatalf("the blob store received credentials on %d requests", n)
		}
	})
	t.Run("the file is read again when it changes", func(t *testing.T) {
		path := cosigntest.DockerConfig(t, "alice", "wrong", reg.Host)
		kc, err := NewFileKeychain(path)
		if err != nil {
			t.Fatal(err)
		}
		v := newVerifier(t, k, WithKeychain(kc))
		if _, _, err := v.Verify(context.Background(), ref); !errors.Is(err, ErrRegistryUnauthorized) {
			t.Fatalf("err = %v, want ErrRegistryUnauthorized", err)
		}
		replace(t, path, cosigntest.DockerConfig(t, "alice", privatePassword, reg.Host))
		mustVerify(t, v, ref)

		// An invalid file refuses every read, naming the file but not its content.
		writeFile(t, path, `{"auths":{"`+reg.Host+`":{"password":"`+privatePassword+`",`)
		_, _, err = v.Verify(context.Background(), ref)
		if !errors.Is(err, ErrRegistryConfig) || !errors.Is(err, ErrRegistryUnavailable) || !strings.Contains(err.Error(), path) {
			t.Fatalf("err = %v, want ErrRegistryConfig naming %s", err, path)
		}
		noSecret(t, err)
		// So does a removed one.
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if _, _, err := v.Verify(context.Background(), ref); !errors.Is(err, ErrRegistryConfig) {
			t.Fatalf("err = %v, want ErrRegistryConfig", err)
		}
	})
}

// TestFileKeychain covers the config.json forms the keychain reads.
func TestFileKeychain(t *testing.T) {
	for desc, tc := range map[string]struct {
		config     string
		user, pass string
		token      string
	}{
		"auth":          {config: `{"auths":{"reg.example":{"auth":"YWxpY2U6cHc="}}}`, user: "alice", pass: "pw"},
		"username":      {config: `{"auths":{"reg.example":{"username":"bob","password":"pw2"}}}`, user: "bob", pass: "pw2"},
		"identitytoken": {config: `{"auths":{"reg.example":{"username":"<token>","identitytoken":"tok"}}}`, user: "<token>", token: "tok"},
		"https key":     {config: `{"auths":{"https://reg.example":{"auth":"YWxpY2U6cHc="}}}`, user: "alice", pass: "pw"},
		"other host":    {config: `{"auths":{"other.example":{"auth":"YWxpY2U6cHc="}}}`},
	} {
		t.Run(desc, func(t *testing.T) {
			path := t.TempDir() + "/config.json"
			writeFile(t, path, tc.config)
			kc, err := NewFileKeychain(path)
			if err != nil {
				t.Fatal(err)
			}
			res, err := name.NewRepository("reg.example/plugins/fx")
			if err != nil {
				t.Fatal(err)
			}
			a, err := kc.Resolve(res)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := a.Authorization()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Username != tc.user || cfg.Password != tc.pass || cfg.IdentityToken != tc.token {
				t.Fatalf("resolved %q/%q/%q", cfg.Username, cfg.Password, cfg.IdentityToken)
			}
		})
	}
	t.Run("invalid at start", func(t *testing.T) {
		path := t.TempDir() + "/config.json"
		writeFile(t, path, `{"auths": "`+privatePassword)
		_, err := NewFileKeychain(path)
		if !errors.Is(err, ErrRegistryConfig) || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), privatePassword) {
			t.Fatalf("err = %v", err)
		}
		if _, err := NewFileKeychain(t.TempDir() + "/none.json"); !errors.Is(err, ErrRegistryConfig) {
			t.Fatalf("missing file: err = %v", err)
		}
	})
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	// A later mtime even on coarse file system clocks.
	later := time.Now().Add(time.Duration(len(content)) * time.Second)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
}

func replace(t *testing.T, path, from string) {
	t.Helper()
	raw, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(raw)+"\n")
}
