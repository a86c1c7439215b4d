package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestVerifyPrivateRegistry runs `plugin verify` against a registry that
// requires basic auth and redirects blob reads to a second server (issue
// 17): anonymous and wrong credentials exit RegistryUnauthorized, the
// owner's docker config and --registry-config verify, the redirect target
// receives no credentials, and the password never appears in the output.
func TestVerifyPrivateRegistry(t *testing.T) {
	const password = "cli-pa55-s3cret-Qw8"
	im := newImages(t)
	reg := cosigntest.NewPrivateRegistry(t, "owner", password)
	ref := reg.PushImage(t, "plugins/fx", cosigntest.ManifestLabel(t, fxV1))
	reg.Sign(t, ref, im.key)
	reg.Lock()

	// No docker config of the tester's own.
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("DOCKER_CONFIG", filepath.Join(home, "no-docker"))
	t.Setenv("XDG_RUNTIME_DIR", home)
	t.Setenv("XDG_CONFIG_HOME", home)

	run := func(t *testing.T, code int, args ...string) result {
		t.Helper()
		r := openfief(t, nil, runOpts{}, append([]string{"plugin", "verify", ref.String(), "--signers", im.signers}, args...)...)
		if r.code != code {
			t.Fatalf("exit code %d, want %d\n%s", r.code, code, r)
		}
		if strings.Contains(r.out+r.errOut, password) {
			t.Fatalf("the output holds the password:\n%s", r)
		}
		return r
	}

	t.Run("anonymous", func(t *testing.T) {
		expect(t, run(t, ExitRegistryUnauthorized), ExitRegistryUnauthorized, "RegistryUnauthorized")
	})
	t.Run("wrong password", func(t *testing.T) {
		cfg := cosigntest.DockerConfig(t, "owner", "wrong", reg.Host)
		expect(t, run(t, ExitRegistryUnauthorized, "--registry-config", cfg), ExitRegistryUnauthorized, "RegistryUnauthorized")
	})
	t.Run("--registry-config", func(t *testing.T) {
		cfg := cosigntest.DockerConfig(t, "owner", password, reg.Host)
		expect(t, run(t, ExitOK, "--registry-config", cfg), ExitOK, "Result:     SignedByTrustedSigner")
		if reg.StoreRequests() == 0 {
			t.Fatal("no blob read was redirected")
		}
		if n := reg.StoreAuthorized(); n != 0 {
			t.Fatalf("the redirect target received credentials on %d requests", n)
		}
	})
	t.Run("the owner's docker config", func(t *testing.T) {
		cfg := cosigntest.DockerConfig(t, "owner", password, reg.Host)
		t.Setenv("DOCKER_CONFIG", filepath.Dir(cfg))
		expect(t, run(t, ExitOK), ExitOK, "Result:     SignedByTrustedSigner")
		if n := reg.StoreAuthorized(); n != 0 {
			t.Fatalf("the redirect target received credentials on %d requests", n)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		expect(t, run(t, ExitUsage, "--registry-config", filepath.Join(t.TempDir(), "none.json")), ExitUsage, "--registry-config", "no such file")
	})
	t.Run("invalid file", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "config.json")
		if err := os.WriteFile(cfg, []byte(`{"auths":{"x":{"password":"`+password), 0o600); err != nil {
			t.Fatal(err)
		}
		expect(t, run(t, ExitInvalid, "--registry-config", cfg), ExitInvalid, "--registry-config", cfg)
	})
}
