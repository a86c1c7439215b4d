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
// with the local-process stand-in, which judges every check but network.

// brokenManifest is the label of every broken plugin but badlabel's.
const brokenManifest = `{"capabilities":["connector"]}`

// testPlugin is one plugin the tests build: its package, label and config.
type testPlugin struct {
	pkg, label, config string
}

// firstParty are the first-party plugins, with a config each would be
// installed with.
var firstParty = map[string]testPlugin{
	"nbp-fx":     {pkg: "./plugins/nbp-fx", config: `{"currencies":["EUR"]}`},
	"ibkr-flex":  {pkg: "./plugins/ibkr-flex", config: `{"accounts":{"U1234567":{"cash":{"USD":"ibkr-usd"}}}}`},
	"webdav-csv": {pkg: "./plugins/webdav-csv", config: `{"url":"https://dav.example.test/records/"}`},
}

// broken are the plugins written to break one rule each, by the check that
// must fail.
var broken = map[string]struct {
	dir, label string
}{
	CheckAuth:      {"noauth", brokenManifest},
	CheckSync:      {"baddelivery", brokenManifest},
	CheckSigterm:   {"nosigterm", brokenManifest},
	CheckResources: {"memoryhog", brokenManifest},
	CheckNetwork:   {"directnet", brokenManifest},
	CheckLabel:     {"badlabel", `{"capabilities":["teleport"],"egress":["http://example.com/"]}`},
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

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
		if buildDir, buildErr = os.MkdirTemp("", "openfief-harness-bins-"); buildErr != nil {
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
	img, err := images.ToolImage(name, "github.com/arkadiuss/openfief/internal/harness/test", bin, time.Unix(1767225600, 0))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg := cf.Config
	cfg.Labels = map[string]string{plugins.ManifestLabel: label}
	img, err = mutate.Config(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
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

func runLocal(t *testing.T, img v1.Image, name, config string) Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{
		Image: img, Name: name, Config: []byte(config), Start: LocalProcess,
		GracePeriod: 5 * time.Second, ServeTimeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	var b strings.Builder
	_ = rep.WriteText(&b)
	t.Logf("report:\n%s", b.String())
	return rep
}

func TestFirstPartyPluginsPass(t *testing.T) {
	dir := binaries(t)
	for name, p := range firstParty {
		t.Run(name, func(t *testing.T) {
			rep := runLocal(t, pluginImage(t, dir, name, firstPartyLabel(t, name)), name, p.config)
			if rep.Failed() {
				t.Errorf("%s failed a check", name)
			}
			for _, must := range []string{CheckServes, CheckAuth, CheckSigterm, CheckResources, CheckEgress} {
				if res, _ := rep.Get(must); res.Status != Pass {
					t.Errorf("%s: %s is %s, want pass (%s)", name, must, res.Status, res.Reason)
				}
			}
		})
	}
}

func TestBrokenPluginsFailTheirCheck(t *testing.T) {
	dir := binaries(t)
	for check, b := range broken {
		t.Run(b.dir, func(t *testing.T) {
			rep := runLocal(t, pluginImage(t, dir, b.dir, b.label), b.dir, "")
			res, _ := rep.Get(check)
			want := Fail
			if check == CheckNetwork {
				// The stand-in cannot see the plugin's network: the
				// sandbox's test (TestSandboxSeesDirectConnections) judges it.
				want = Skip
			}
			if res.Status != want {
				t.Errorf("%s: %s is %s (%s), want %s", b.dir, check, res.Status, res.Reason, want)
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
// check, directnet's network check included. It is skipped where the
// sandbox is not built in or the test does not run as root.
func TestSandboxBrokenPluginsFailTheirCheck(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root")
	}
	dir := binaries(t)
	for check, b := range broken {
		t.Run(b.dir, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			rep, err := Run(ctx, Options{
				Image: pluginImage(t, dir, b.dir, b.label), Name: b.dir, Start: NewRuntime,
				GracePeriod: 5 * time.Second, ServeTimeout: 20 * time.Second,
			})
			if errors.Is(err, ErrNoSandbox) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			_ = rep.WriteText(&out)
			t.Logf("report:\n%s", out.String())
			if res, _ := rep.Get(check); res.Status != Fail {
				t.Errorf("%s: %s is %s (%s), want fail", b.dir, check, res.Status, res.Reason)
			}
		})
	}
}
