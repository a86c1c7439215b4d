package operator

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestImageCheckerRegistryConfig builds the operator's image checker as the
// binary does (--registry-config) against a registry that requires
// basic auth and redirects blob reads to a second server: anonymous is
// RegistryUnauthorized, the mounted file's credentials verify, the redirect
// target receives none, and no error names the password.
func TestImageCheckerRegistryConfig(t *testing.T) {
	const password = "op-pa55-s3cret-7Yk"
	key := cosigntest.NewKey(t)
	dir := t.TempDir()
	signers := filepath.Join(dir, "signers.json")
	if err := os.WriteFile(signers, key.SignersJSON(t, "owner"), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := cosigntest.NewPrivateRegistry(t, "operator", password)
	m := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Egress: []string{"api.nbp.pl"}}
	ref := reg.PushImage(t, "plugins/fx", cosigntest.ManifestLabel(t, m))
	reg.Sign(t, ref, key)
	reg.Lock()

	check := func(t *testing.T, o Options) (string, string, bool) {
		t.Helper()
		o.TrustedSignersFile = signers
		pv, err := NewImageChecker(o)
		if err != nil {
			t.Fatal(err)
		}
		v := pv.Check(context.Background(), ref, nil)
		if strings.Contains(v.Message, password) {
			t.Errorf("the message holds the password: %s", v.Message)
		}
		return v.Reason, v.Message, v.Verified()
	}

	t.Run("anonymous", func(t *testing.T) {
		if reason, msg, _ := check(t, Options{}); reason != v1alpha1.ReasonRegistryUnauthorized {
			t.Fatalf("reason %s (%s), want RegistryUnauthorized", reason, msg)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		cfg := cosigntest.DockerConfig(t, "operator", "wrong", reg.Host)
		if reason, msg, _ := check(t, Options{RegistryConfigFile: cfg}); reason != v1alpha1.ReasonRegistryUnauthorized {
			t.Fatalf("reason %s (%s), want RegistryUnauthorized", reason, msg)
		}
	})
	t.Run("mounted file", func(t *testing.T) {
		cfg := cosigntest.DockerConfig(t, "operator", password, reg.Host)
		if reason, msg, ok := check(t, Options{RegistryConfigFile: cfg}); !ok {
			t.Fatalf("not verified: %s: %s", reason, msg)
		}
		if reg.StoreRequests() == 0 {
			t.Fatal("no blob read was redirected")
		}
		if n := reg.StoreAuthorized(); n != 0 {
			t.Fatalf("the redirect target received credentials on %d requests", n)
		}
	})
	t.Run("invalid file refuses to start", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "config.json")
		if err := os.WriteFile(cfg, []byte(`{"auths":{"x":{"password":"`+password), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := NewImageChecker(Options{TrustedSignersFile: signers, RegistryConfigFile: cfg})
		if err == nil || !strings.Contains(err.Error(), cfg) || strings.Contains(err.Error(), password) {
			t.Fatalf("err = %v", err)
		}
	})
}
