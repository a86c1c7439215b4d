//go:build heavy

package plugininit

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/images"
)

// TestTSProjects writes a TypeScript connector and view against this tree's
// SDK (--sdk, a copy of sdk/ts built into a temporary folder, as npm pack
// would ship it) and runs what a vendor runs in them: npm install (from the
// npm registry), npm test (the type check and the test) and npm run build.
// The built program then refuses to start without the environment the
// operator sets. The skeletons' TypeScript must be formatted by the SDK's
// prettier and its settings. It needs sdk/ts's npm packages (make ts-deps) to build the
// SDK, and writes nothing under sdk/ts.
func TestTSProjects(t *testing.T) {
	if testing.Short() {
		t.Skip("installs npm packages: not in -short")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := images.TSDepsInstalled(abs); err != nil {
		t.Skipf("sdk/ts's npm packages are not installed (make ts-deps): %v", err)
	}
	src := filepath.Join(abs, "sdk", "ts")
	// The skeletons are formatted as the SDK's sources are.
	run(t, abs, filepath.Join(src, "node_modules", ".bin", "prettier"), "--config", filepath.Join(src, ".prettierrc.json"), "--check", filepath.Join("internal", "plugininit", "skeleton", "ts"))
	sdk := filepath.Join(t.TempDir(), "sdk")
	run(t, src, filepath.Join(src, "node_modules", ".bin", "tsc"), "-p", filepath.Join(src, "tsconfig.json"), "--outDir", filepath.Join(sdk, "dist"))
	for _, f := range []string{"package.json", "LICENSE", "README.md"} {
		raw, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sdk, f), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, kind := range []Kind{Connector, View} {
		t.Run(string(kind), func(t *testing.T) {
			o := Options{Name: "acme-" + string(kind), Lang: TypeScript, Kind: kind, SDK: sdk}
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if _, err := Write(dir, o); err != nil {
				t.Fatal(err)
			}
			run(t, dir, "npm", "install", "--no-audit", "--no-fund")
			out := run(t, dir, "npm", "test")
			if !strings.Contains(out, "# fail 0") {
				t.Errorf("npm test:\n%s", out)
			}
			run(t, dir, "npm", "run", "build")
			// Without the operator's environment the plugin says what is
			// missing and exits 1.
			cmd := exec.Command("node", filepath.Join(dir, "dist", "main.js"))
			cmd.Dir, cmd.Env = dir, []string{"PATH=" + os.Getenv("PATH")}
			msg, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || len(msg) == 0 {
				t.Errorf("the plugin without its environment: %v\n%s", err, msg)
			}
		})
	}
}

// run runs name with args in dir, failing the test when it fails, and
// returns its output.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
