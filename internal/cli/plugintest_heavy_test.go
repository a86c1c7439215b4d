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
	bin := filepath.Join(t.TempDir(), "plugin")
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	img, err := imagebuild.ToolImage(repo, "github.com/arkadiuss/openfief/internal/cli/test", b, time.Unix(1767225600, 0))
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
