//go:build heavy

package release

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// binDirEnv overrides where the tools make test-deps-heavy builds are
// looked up (.bin/ of the repository by default).
const binDirEnv = "OPENFIEF_BIN_DIR"

// heavyTool returns the path of name in .bin/ (or OPENFIEF_BIN_DIR),
// failing the test, never skipping it, when make has not built it.
func heavyTool(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv(binDirEnv)
	if dir == "" {
		dir = filepath.Join(testutil.MustRepoRoot(), ".bin")
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is not built (%v): run make test-deps-heavy (or make vendor-tools), which builds cosign from hack/tools into .bin/", name, err)
	}
	return path
}

// runReleaseNotes runs every command of the Verify section of the release's
// RELEASE.md, as a user would in the release's directory, with the stock
// cosign and the release's own openfief on PATH (as `openfief`), and checks
// that each succeeds and that what the section says openfief prints is
// printed. The tools get an empty HOME and a proxy that refuses every
// connection, so only the loopback registry can answer them.
func runReleaseNotes(t *testing.T, dir string, res *Result) {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(dir, NotesFile))
	if err != nil {
		t.Fatal(err)
	}
	blocks, expected := verifyBlocks(t, string(md))
	bin := t.TempDir()
	for name, target := range map[string]string{
		"cosign":   heavyTool(t, "cosign"),
		"openfief": filepath.Join(dir, CLIFile(images.HostPlatform())),
	} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	home := t.TempDir()
	const deadProxy = "http://127.0.0.1:1"
	env := []string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "TUF_ROOT=" + filepath.Join(home, ".sigstore"),
		"HTTPS_PROXY=" + deadProxy, "HTTP_PROXY=" + deadProxy, "https_proxy=" + deadProxy, "http_proxy=" + deadProxy,
	}
	var verifyOut string
	ran := 0
	for _, block := range blocks {
		for line := range strings.Lines(block) {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			cmd := exec.CommandContext(ctx, "bash", "-c", line)
			cmd.Dir, cmd.Env = dir, env
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			cancel()
			if err != nil {
				t.Errorf("RELEASE.md: %s: %v\n%s", line, err, out.String())
				continue
			}
			t.Logf("RELEASE.md: %s\n%s", line, out.String())
			ran++
			if strings.HasPrefix(line, "openfief plugin verify ") {
				verifyOut = out.String()
			}
		}
	}
	if ran < 7 {
		t.Errorf("ran %d commands of RELEASE.md's Verify section, want its 7", ran)
	}
	if verifyOut == "" {
		t.Fatal("RELEASE.md's Verify section runs no openfief plugin verify")
	}
	a := res.Attestations["nbp-fx"]
	for _, want := range append(expected, a.SBOM, a.Provenance) {
		if !strings.Contains(verifyOut, want) {
			t.Errorf("openfief plugin verify does not print %q, as RELEASE.md says:\n%s", want, verifyOut)
		}
	}
}
