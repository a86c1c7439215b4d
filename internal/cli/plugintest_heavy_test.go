//go:build heavy

package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/arkadiuss/openfief/internal/harness"
	imagebuild "github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/plugininit"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// pushPlugin builds the Go main pkg of this tree, packs it as
// internal/images packs a plugin with label, and pushes it to im's registry.
func (im *images) pushPlugin(t *testing.T, repo, pkg, label string) plugins.ImageRef {
	t.Helper()
	root, err := imagebuild.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	return im.pushBinary(t, repo, goBuild(t, root, pkg, "CGO_ENABLED=0"), label)
}

// goBuild builds the Go main pkg of the module in dir, with env added to
// this process's, and returns the binary.
func goBuild(t *testing.T, dir, pkg string, env ...string) []byte {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "plugin")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pushBinary packs a static binary as internal/images packs a Go plugin
// (ToolImage), labelled label, and pushes it to im's registry.
func (im *images) pushBinary(t *testing.T, repo string, bin []byte, label string) plugins.ImageRef {
	t.Helper()
	img, err := imagebuild.ToolImage(repo, "github.com/arkadiuss/openfief/internal/cli/test", bin, time.Unix(1767225600, 0))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg := cf.Config
	cfg.Labels = map[string]string{plugins.ManifestLabel: label}
	if img, err = mutate.Config(img, cfg); err != nil {
		t.Fatal(err)
	}
	return im.reg.Push(t, repo, img)
}

// TestPluginTest runs `openfief plugin test` on a good and a bad plugin
// image from a registry, with the local-process stand-in runtime: the
// table and JSON reports, the signature half of the label check, and the
// exit codes.
func TestPluginTest(t *testing.T) {
	im := newImages(t)
	const label = `{"capabilities":["connector"]}`
	// badlabel's binary is a well-behaved connector; only its test labels
	// it wrongly.
	good := im.pushPlugin(t, "plugins/good", "./internal/harness/testdata/broken/badlabel", label)
	im.sign(t, good)
	bad := im.pushPlugin(t, "plugins/bad", "./internal/harness/testdata/broken/baddelivery", label)
	local := runOpts{pluginRuntime: harness.LocalProcess}

	r := openfief(t, nil, local, "plugin", "test", good.String(), "--signers", im.signers)
	expect(t, r, ExitOK, "CHECK", "RESULT", "REASON", "SignedByTrustedSigner by owner", "0 failed")
	for _, line := range []string{"label        pass", "serves       pass", "auth         pass", "sync         pass", "sigterm      pass"} {
		if !strings.Contains(r.out, line) {
			t.Errorf("no line %q in:\n%s", line, r.out)
		}
	}

	pub := filepath.Join(t.TempDir(), "cosign.pub")
	writeFile(t, pub, im.key.PublicKeyPEM(t))
	r = openfief(t, nil, local, "plugin", "test", good.String(), "--key", pub, "-o", "json")
	expect(t, r, ExitOK)
	rep := decodeReport(t, r.out)
	if got, _ := rep.Get(harness.CheckLabel); got.Status != harness.Pass {
		t.Errorf("label with --key: %+v", got)
	}

	r = openfief(t, nil, local, "plugin", "test", bad.String())
	expect(t, r, ExitFailure, "sync         fail", "not a decimal", "label        skip", "signature not checked", "a check failed")

	r = openfief(t, nil, local, "plugin", "test", bad.String(), "--signers", im.signers, "-o", "json")
	expect(t, r, ExitFailure)
	rep = decodeReport(t, r.out)
	if got, _ := rep.Get(harness.CheckLabel); got.Status != harness.Fail || !strings.Contains(got.Reason, "Unsigned") {
		t.Errorf("label of an unsigned image with --signers: %+v", got)
	}
	if got, _ := rep.Get(harness.CheckSync); got.Status != harness.Fail {
		t.Errorf("sync: %+v", got)
	}

	r = openfief(t, nil, local, "plugin", "test", good.String(), "--signers", im.signers, "--key", pub)
	expect(t, r, ExitUsage, "--key and --signers")
	r = openfief(t, nil, local, "plugin", "test", good.String(), "-o", "yaml")
	expect(t, r, ExitUsage, "want text or json")
}

// decodeReport reads a JSON report and checks its checks come in the
// harness's order.
func decodeReport(t *testing.T, out string) harness.Report {
	t.Helper()
	var rep harness.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not a JSON report: %v\n%s", err, out)
	}
	var names []string
	for _, c := range rep.Checks {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != strings.Join(harness.Checks, ",") {
		t.Errorf("checks %v, want %v", names, harness.Checks)
	}
	return rep
}

// TestPluginTestSkeletonInSandbox runs `openfief plugin test --key` as a
// vendor would on the connector plugin init writes in Go: built as its own
// module against this tree's SDK, pushed to a registry, signed with a key
// (internal/ocisign, the format cosign v3 writes) and run in the sandbox,
// as root. Every check it can judge passes, the label's signature half
// included, and the command exits 0.
func TestPluginTestSkeletonInSandbox(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root")
	}
	root, err := imagebuild.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	o := plugininit.Options{Name: "acme", Lang: plugininit.Go, Kind: plugininit.Connector, SDK: filepath.Join(root, "sdk", "go")}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := plugininit.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	bin := goBuild(t, dir, ".", "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	manifest, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	label, err := imagebuild.ManifestLabel(manifest)
	if err != nil {
		t.Fatal(err)
	}
	im := newImages(t)
	ref := im.pushBinary(t, "vendor/acme", bin, label)
	signer, err := ocisign.NewKeySigner()
	if err != nil {
		t.Fatal(err)
	}
	if err := signer.Sign(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	pem, err := signer.PublicKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(t.TempDir(), "cosign.pub")
	writeFile(t, pub, pem)

	r := openfief(t, nil, runOpts{}, "plugin", "test", ref.String(), "--key", pub, "-o", "json")
	expect(t, r, ExitOK)
	rep := decodeReport(t, r.out)
	for _, c := range rep.Checks {
		if c.Status == harness.Fail {
			t.Errorf("%s failed: %s", c.Name, c.Reason)
		}
	}
	for _, name := range []string{harness.CheckLabel, harness.CheckServes, harness.CheckAuth, harness.CheckSync, harness.CheckNetwork, harness.CheckSigterm} {
		if got, _ := rep.Get(name); got.Status != harness.Pass {
			t.Errorf("%s is %s, want pass: %s", name, got.Status, got.Reason)
		}
	}
	if got, _ := rep.Get(harness.CheckLabel); !strings.Contains(got.Reason, "SignedByTrustedSigner by key") {
		t.Errorf("label: %s, want the key named as the signer", got.Reason)
	}
}
