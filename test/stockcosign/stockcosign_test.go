//go:build heavy

// Package stockcosign checks that what a plugin vendor makes with the stock
// tools is what the platform verifies: an image pushed and labelled with
// crane and signed offline with cosign v3 (both built from the modules
// pinned in hack/tools by make vendor-tools) is admitted by the operator's
// verifier and by `openfief plugin verify`, on a registry with the OCI
// Referrers API and on one without it (the sha256-<hex> tag); the same image
// signed in cosign's legacy format is refused with the hint that says how to
// sign again. The commands are the ones docs/images.md gives vendors.
//
// It lives apart from internal/trust and internal/cli because it drives both
// (trust may not import the CLI) and needs the heavy tag: it runs binaries
// make test-deps-heavy builds, and fails naming that target when they are
// missing.
package stockcosign

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/internal/trust"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// binDirEnv overrides where the tools are looked up, as for the control plane.
const binDirEnv = "OPENFIEF_BIN_DIR"

// tool returns the path of name in .bin/ (or OPENFIEF_BIN_DIR), failing the
// test, never skipping it, when make has not built it.
func tool(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv(binDirEnv)
	if dir == "" {
		root, err := testutil.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, ".bin")
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is not built (%v): run make test-deps-heavy (or make vendor-tools), which builds cosign and crane from hack/tools into .bin/", name, err)
	}
	return path
}

// offline is an environment for the tools that proves they stay offline: a
// proxy that only counts connections stands for the network (loopback
// registries bypass a proxy, so only a call to a public service would reach
// it), HOME is empty and COSIGN_PASSWORD unlocks the key.
type offline struct {
	env   []string
	calls *atomic.Int64
}

func newOffline(t *testing.T) offline {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	calls := &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			calls.Add(1)
			_ = c.Close()
		}
	}()
	proxy := "http://" + ln.Addr().String()
	home := t.TempDir()
	return offline{calls: calls, env: []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"TUF_ROOT=" + filepath.Join(home, ".sigstore"),
		"HTTPS_PROXY=" + proxy, "HTTP_PROXY=" + proxy, "https_proxy=" + proxy, "http_proxy=" + proxy,
		"COSIGN_PASSWORD=vendor-password",
	}}
}

// run runs a tool in dir and returns its standard output; it fails the test
// on a non-zero exit or after two minutes (a tool waiting on the network
// would show as that timeout).
func (o offline) run(t *testing.T, dir, bin string, args ...string) string {
	t.Helper()
	out, err := o.try(t, dir, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// try runs a tool like run and returns its failure instead of failing.
func (o offline) try(t *testing.T, dir, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, o.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w after %s\nstdout: %s\nstderr: %s", filepath.Base(bin), strings.Join(args, " "), err,
			time.Since(start).Round(time.Millisecond), stdout.String(), stderr.String())
	}
	t.Logf("%s %s (%s)\n%s", filepath.Base(bin), strings.Join(args, " "), time.Since(start).Round(time.Millisecond), stderr.String())
	return stdout.String(), nil
}

// layerTar writes a one-file layer for crane append, holding name (so two
// images differ).
func layerTar(t *testing.T, dir, name string) string {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	body := []byte("the plugin " + name + " would be here\n")
	if err := tw.WriteHeader(&tar.Header{Name: "hello.txt", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, strings.ReplaceAll(name, "/", "-")+".tar")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// manifest is the plugin manifest the images carry as their label.
var manifest = plugins.Manifest{
	Capabilities: []plugins.Capability{plugins.CapabilityConnector},
	Egress:       []string{"api.example.com"},
}

// TestStockCosignSignatureVerifies pushes an image with crane, signs it with
// cosign v3 exactly as docs/images.md tells vendors, and checks the
// verifier and the CLI admit it as signed by the vendor's key, with and
// without the Referrers API; then it signs another image in cosign's legacy
// format and checks both refuse it with the hint. No tool contacts anything
// but the registry.
func TestStockCosignSignatureVerifies(t *testing.T) {
	crane, cosignBin := tool(t, "crane"), tool(t, "cosign")
	label, err := json.Marshal(manifest)
	if err != nil {
		t.Fatal(err)
	}
	for name, referrers := range map[string]bool{"referrers API": true, "tag fallback": false} {
		t.Run(name, func(t *testing.T) {
			reg := cosigntest.NewRegistry(t, referrers)
			off := newOffline(t)
			dir := t.TempDir()

			// The vendor's key pair, encrypted with COSIGN_PASSWORD.
			off.run(t, dir, cosignBin, "generate-key-pair")
			pub, err := os.ReadFile(filepath.Join(dir, "cosign.pub"))
			if err != nil {
				t.Fatal(err)
			}

			// An image with the manifest label, made and pushed by crane.
			push := func(repo string) plugins.ImageRef {
				base := reg.Host + "/" + repo + ":base"
				off.run(t, dir, crane, "append", "--oci-empty-base", "-f", layerTar(t, dir, repo), "-t", base)
				off.run(t, dir, crane, "mutate", base, "--label", plugins.ManifestLabel+"="+string(label), "-t", reg.Host+"/"+repo+":v1")
				digest := strings.TrimSpace(off.run(t, dir, crane, "digest", reg.Host+"/"+repo+":v1"))
				ref, err := plugins.ParseImageRef(reg.Host + "/" + repo + "@" + digest)
				if err != nil {
					t.Fatalf("crane digest: %v", err)
				}
				return ref
			}
			signed := push("acme/fx")
			off.run(t, dir, cosignBin, "sign", "--key", "cosign.key", "--tlog-upload=false", "--use-signing-config=false", "--yes", signed.String())
			legacy := push("acme/legacy")
			off.run(t, dir, cosignBin, "sign", "--key", "cosign.key", "--tlog-upload=false", "--use-signing-config=false",
				"--new-bundle-format=false", "--yes", legacy.String())

			// Where the signatures went: the bundle as a referrer (listed
			// under the sha256-<hex> tag without the API), the legacy one
			// under sha256-<hex>.sig.
			tags := off.run(t, dir, crane, "ls", reg.Host+"/acme/fx")
			if hasTag := strings.Contains(tags, strings.Replace(signed.Digest(), ":", "-", 1)); hasTag == referrers {
				t.Errorf("referrers API %v, yet the sha256-<hex> tag is there: %v; tags:\n%s", referrers, hasTag, tags)
			}
			if tags := off.run(t, dir, crane, "ls", reg.Host+"/acme/legacy"); !strings.Contains(tags, strings.Replace(legacy.Digest(), ":", "-", 1)+".sig") {
				t.Errorf("no sha256-<hex>.sig tag after the legacy signature; tags:\n%s", tags)
			}
			if n := off.calls.Load(); n != 0 {
				t.Errorf("the tools reached for the network %d times", n)
			}
			if referrers {
				// The control: without the offline flags cosign fetches its
				// signing config from Sigstore's TUF repository, which the
				// counting proxy sees (and refuses).
				if _, err := off.try(t, dir, cosignBin, "sign", "--key", "cosign.key", "--yes", signed.String()); err == nil {
					t.Error("cosign sign without the offline flags succeeded with no network")
				}
				if off.calls.Load() == 0 {
					t.Error("cosign sign without the offline flags did not reach the stand-in network: the check above proves nothing")
				}
			}

			// The operator's verifier, with the owner's signers naming the key.
			signers, err := json.Marshal(map[string]any{"signers": []any{map[string]string{"name": "acme-vendor", "publicKey": string(pub)}}})
			if err != nil {
				t.Fatal(err)
			}
			policy, err := trust.NewPolicy(signers)
			if err != nil {
				t.Fatal(err)
			}
			images, err := trust.NewImageVerifier(policy)
			if err != nil {
				t.Fatal(err)
			}
			v := trust.NewPolicyVerifier(images, policy)
			got := v.Check(context.Background(), signed, &manifest)
			if got.Reason != v1alpha1.ReasonSignedByTrustedSigner || got.Signer != "acme-vendor" {
				t.Errorf("verifier: %+v, want SignedByTrustedSigner by acme-vendor", got)
			}
			got = v.Check(context.Background(), legacy, &manifest)
			if got.Reason != v1alpha1.ReasonUnsigned || !strings.HasSuffix(got.Message, trust.LegacySignatureHint) {
				t.Errorf("verifier, legacy signature: %+v, want Unsigned with the legacy hint", got)
			}

			// The CLI, as an owner checks an image before trusting it.
			signersFile := filepath.Join(dir, "signers.json")
			if err := os.WriteFile(signersFile, signers, 0o600); err != nil {
				t.Fatal(err)
			}
			code, out := openfief(t, "plugin", "verify", signed.String(), "--signers", signersFile)
			if code != cli.ExitOK || !strings.Contains(out, "Result:     SignedByTrustedSigner") || !strings.Contains(out, "Signer:     acme-vendor (Owner, public key)") {
				t.Errorf("openfief plugin verify: exit %d\n%s", code, out)
			}
			code, out = openfief(t, "plugin", "verify", legacy.String(), "--signers", signersFile)
			if code != cli.ExitUnsigned || !strings.Contains(out, "legacy format") || !strings.Contains(out, "--use-signing-config=false") {
				t.Errorf("openfief plugin verify, legacy signature: exit %d\n%s", code, out)
			}
		})
	}
}

// openfief runs the CLI in this process and returns its exit code and
// output.
func openfief(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := cli.Main(ctx, args, cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	t.Logf("openfief %s: exit %d\n%s", strings.Join(args, " "), code, out.String())
	return code, out.String()
}
