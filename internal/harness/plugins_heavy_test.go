//go:build heavy

package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// The heavy tests build the first-party plugins and the broken ones from
// this tree, pack each into an image as internal/images does (ToolImage,
// the manifest label from its manifest.json), and run the harness on them
// in the sandbox, as `openfief plugin test` does (as root); the broken ones
// also with the local-process stand-in, which judges every check but
// network.

// brokenManifest is the label of every broken plugin but badlabel's.
const brokenManifest = `{"capabilities":["connector"]}`

// testPlugin is one plugin the tests build: its package and config, and,
// for one with a Secret, the check that reads it and the Secret's mount.
type testPlugin struct {
	pkg, config         string
	secretCheck, secret string
}

// firstParty are the first-party plugins, with a config each would be
// installed with.
var firstParty = map[string]testPlugin{
	"nbp-fx": {pkg: "./plugins/nbp-fx", config: `{"currencies":["EUR"]}`},
	"ibkr-flex": {pkg: "./plugins/ibkr-flex", config: `{"accounts":{"U1234567":{"cash":{"USD":"ibkr-usd"}}}}`,
		secretCheck: CheckSync, secret: "/etc/openfief/ibkr-flex"},
	"webdav-csv": {pkg: "./plugins/webdav-csv", config: `{"url":"https://dav.example.test/records/"}`,
		secretCheck: CheckPages, secret: "/etc/openfief/webdav-csv"},
}

// broken are the plugins written to break one rule each, by the check that
// must fail. sandboxAlso is a check that fails with it in the sandbox as a
// consequence: memoryhog holds its memory from its start, so the sandbox's
// cgroup kills it before it serves, where the stand-in, which bounds
// nothing, lets it serve.
var broken = map[string]struct {
	dir, label  string
	sandboxAlso string
}{
	CheckAuth:      {dir: "noauth", label: brokenManifest},
	CheckSync:      {dir: "baddelivery", label: brokenManifest},
	CheckSigterm:   {dir: "nosigterm", label: brokenManifest},
	CheckResources: {dir: "memoryhog", label: brokenManifest, sandboxAlso: CheckServes},
	CheckNetwork:   {dir: "directnet", label: brokenManifest},
	CheckLabel:     {dir: "badlabel", label: `{"capabilities":["teleport"],"egress":["http://example.com/"]}`},
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// shared are the folders the tests' shared builds made, removed once every
// test ran.
var shared struct {
	sync.Mutex
	dirs []string
}

// sharedDir makes a temporary folder that lives until the package's tests
// end.
func sharedDir(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err == nil {
		shared.Lock()
		shared.dirs = append(shared.dirs, dir)
		shared.Unlock()
	}
	return dir, err
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range shared.dirs {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}

// binaries builds every test plugin once for the package's tests, in one go
// build, and returns the directory holding them by name.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := images.FindRoot(".")
		if err != nil {
			buildErr = err
			return
		}
		if buildDir, buildErr = sharedDir("openfief-harness-bins-"); buildErr != nil {
			return
		}
		args := []string{"build", "-o", buildDir + string(filepath.Separator)}
		for _, p := range firstParty {
			args = append(args, p.pkg)
		}
		for _, b := range broken {
			args = append(args, "./internal/harness/testdata/broken/"+b.dir)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

// pluginImage packs binary name of dir into an image labelled label.
func pluginImage(t *testing.T, dir, name, label string) v1.Image {
	t.Helper()
	bin, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	img, err := packBinary(name, bin, label)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// packBinary packs a static binary as internal/images packs a Go plugin
// (ToolImage), with the manifest label label.
func packBinary(name string, bin []byte, label string) (v1.Image, error) {
	img, err := images.ToolImage(name, "github.com/arkadiuss/openfief/internal/harness/test", bin, time.Unix(1767225600, 0))
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg := cf.Config
	cfg.Labels = map[string]string{plugins.ManifestLabel: label}
	return mutate.Config(img, cfg)
}

// firstPartyLabel is the label internal/images gives plugin name.
func firstPartyLabel(t *testing.T, name string) string {
	t.Helper()
	root, err := images.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "plugins", name, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	label, err := images.ManifestLabel(raw)
	if err != nil {
		t.Fatal(err)
	}
	return label
}

// needSandbox skips a test of the sandbox where it cannot run: it needs
// root.
func needSandbox(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root")
	}
}

// runPlugin runs the harness on img with start (NewRuntime or the
// LocalProcess stand-in) and logs the report. A build without the sandbox
// skips the test.
func runPlugin(t *testing.T, start Starter, img v1.Image, name, config string) Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	rep, err := Run(ctx, Options{
		Image: img, Name: name, Config: []byte(config), Start: start,
		GracePeriod: 5 * time.Second, ServeTimeout: 20 * time.Second,
	})
	if errors.Is(err, ErrNoSandbox) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	var b strings.Builder
	_ = rep.WriteText(&b)
	t.Logf("report (%s):\n%s", time.Since(began).Round(time.Millisecond), b.String())
	return rep
}

// wantPass fails t when a check of rep failed, or one of must did not pass.
func wantPass(t *testing.T, rep Report, must ...string) {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Status == Fail {
			t.Errorf("%s: %s failed: %s", rep.Image, c.Name, c.Reason)
		}
	}
	for _, name := range must {
		if res, _ := rep.Get(name); res.Status != Pass {
			t.Errorf("%s: %s is %s, want pass (%s)", rep.Image, name, res.Status, res.Reason)
		}
	}
}

// TestFirstPartyPluginsPass runs the first-party Go plugins in the sandbox,
// as `openfief plugin test` does: no check fails, and the network check,
// which only the sandbox judges, passes. Their hosts are stand-ins, so
// sync is skipped (unavailable) or passes; a plugin's Secret is mounted
// empty, so the check that reads it is skipped for the missing key, its
// folder there.
func TestFirstPartyPluginsPass(t *testing.T) {
	needSandbox(t)
	dir := binaries(t)
	for name, p := range firstParty {
		t.Run(name, func(t *testing.T) {
			rep := runPlugin(t, NewRuntime, pluginImage(t, dir, name, firstPartyLabel(t, name)), name, p.config)
			wantPass(t, rep, CheckServes, CheckAuth, CheckSigterm, CheckResources, CheckEgress, CheckNetwork)
			if p.secretCheck == "" {
				return
			}
			res, _ := rep.Get(p.secretCheck)
			if res.Status != Skip || !strings.Contains(res.Reason, "no such file") || strings.Contains(res.Reason, p.secret+"/: no such file") {
				t.Errorf("%s: %s is %s (%s), want a skip for a key missing from the empty mount %s", name, p.secretCheck, res.Status, res.Reason, p.secret)
			}
		})
	}
}

// TestBrokenPluginsFailTheirCheck is the LocalProcess stand-in's own test
// (the CLI's tests run plugins with it): each broken plugin fails its
// check and no other, and the network check, which the stand-in cannot
// see, is skipped rather than passed.
func TestBrokenPluginsFailTheirCheck(t *testing.T) {
	dir := binaries(t)
	for check, b := range broken {
		t.Run(b.dir, func(t *testing.T) {
			rep := runPlugin(t, LocalProcess, pluginImage(t, dir, b.dir, b.label), b.dir, "")
			res, _ := rep.Get(check)
			want := Fail
			if check == CheckNetwork {
				want = Skip
			}
			if res.Status != want {
				t.Errorf("%s: %s is %s (%s), want %s", b.dir, check, res.Status, res.Reason, want)
			}
			if res, _ := rep.Get(CheckNetwork); res.Status != Skip {
				t.Errorf("%s: network is %s under the stand-in, want skip (%s)", b.dir, res.Status, res.Reason)
			}
			for _, other := range rep.Checks {
				if other.Name != check && other.Status == Fail {
					t.Errorf("%s: %s failed too: %s", b.dir, other.Name, other.Reason)
				}
			}
		})
	}
}

// TestSandboxBrokenPluginsFailTheirCheck runs the broken plugins in the
// sandbox (NewRuntime), which sees the network too: each must fail its
// check, directnet's network check included, and no other but its
// consequence (sandboxAlso).
func TestSandboxBrokenPluginsFailTheirCheck(t *testing.T) {
	needSandbox(t)
	dir := binaries(t)
	for check, b := range broken {
		t.Run(b.dir, func(t *testing.T) {
			rep := runPlugin(t, NewRuntime, pluginImage(t, dir, b.dir, b.label), b.dir, "")
			if res, _ := rep.Get(check); res.Status != Fail {
				t.Errorf("%s: %s is %s (%s), want fail", b.dir, check, res.Status, res.Reason)
			}
			for _, other := range rep.Checks {
				if other.Name != check && other.Name != b.sandboxAlso && other.Status == Fail {
					t.Errorf("%s: %s failed too: %s", b.dir, other.Name, other.Reason)
				}
			}
		})
	}
}
