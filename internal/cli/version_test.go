package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	imagebuild "github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/trust/catalog"
)

// TestVersionClient: `openfief version --client`, its -o json and -o yaml,
// and `--version` say the CLI's version without a cluster; a development
// build says so.
func TestVersionClient(t *testing.T) {
	r := openfief(t, nil, runOpts{}, "version", "--client")
	expect(t, r, ExitOK, "Client Version:    ", "(development build)", "Client Commit:     ", "Go Version:        "+runtime.Version())
	if strings.Contains(r.out, "Platform") {
		t.Errorf("--client reached for the platform:\n%s", r)
	}
	r = openfief(t, nil, runOpts{}, "version", "--client", "-o", "json")
	expect(t, r, ExitOK)
	var doc versionReport
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.out)
	}
	if doc.Client.Version == "" || doc.Client.Release || doc.Client.GoVersion != runtime.Version() || doc.Platform != nil {
		t.Errorf("-o json: %+v", doc)
	}
	expect(t, openfief(t, nil, runOpts{}, "version", "--client", "-o", "yaml"), ExitOK, "clientVersion:\n", "  goVersion: "+runtime.Version())
	expect(t, openfief(t, nil, runOpts{}, "--version"), ExitOK, "openfief version "+doc.Client.Version+", "+runtime.Version())
	expect(t, openfief(t, nil, runOpts{}, "version", "-o", "wide"), ExitUsage, "-o \"wide\"")
}

// TestVersionUnreachable: a cluster that cannot be reached prints the
// client's part and then the error, exit 1, as kubectl version does.
func TestVersionUnreachable(t *testing.T) {
	kc := tempFile(t, "kubeconfig", `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
contexts:
- name: one
  context: {cluster: c, user: u}
users:
- name: u
  user: {token: t}
current-context: one
`)
	r := openfief(t, nil, runOpts{}, "--kubeconfig", kc, "version")
	expect(t, r, ExitFailure, "Client Version:", "Error: reading the platform's version", "127.0.0.1:1")
	if strings.Contains(r.out, "Platform Version") {
		t.Errorf("a platform version without a cluster:\n%s", r)
	}
	expect(t, openfief(t, nil, runOpts{}, "--kubeconfig", kc, "version", "--client"), ExitOK, "Client Version:")
}

// TestVersionOfARelease builds the CLI as a release builds it (without Go's
// VCS stamping, the version and commit linked in) and runs it: --version
// and `version --client -o json` say the release's version and commit.
func TestVersionOfARelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI")
	}
	root, err := imagebuild.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	const version, commit = "v9.8.7", "0123456789abcdef0123456789abcdef01234567"
	bin, err := imagebuild.BuildBinary(context.Background(), "", root, v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}, "./cmd/openfief",
		map[string]string{catalog.VersionSymbol: version, catalog.CommitSymbol: commit})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "openfief")
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "openfief version "+version+", commit "+commit+", ") {
		t.Errorf("--version: %v\n%s", err, out)
	}
	out, err = exec.Command(path, "version", "--client", "-o", "json").CombinedOutput()
	var doc versionReport
	if err != nil || json.Unmarshal(out, &doc) != nil || doc.Client.Version != version || doc.Client.Commit != commit || !doc.Client.Release {
		t.Errorf("version --client -o json: %v\n%s", err, out)
	}
}
