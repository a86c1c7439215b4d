//go:build cluster

package incluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/internal/plugininit"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// guideDoc is the plugin authors' guide, whose marked blocks testGuide runs.
const guideDoc = "docs/plugin-authors.md"

// guideMarker marks a block of guideDoc that testGuide runs: "vendor"
// blocks in the vendor's folder, then "owner" blocks against the cluster.
var guideMarker = regexp.MustCompile(`^<!-- guide: (vendor|owner) -->$`)

// guideBlocks returns the shell blocks of doc marked for kind, in order.
func guideBlocks(t *testing.T, doc []byte, kind string) []string {
	t.Helper()
	var (
		blocks  []string
		want    bool // the last marker was for kind, and no block has taken it yet
		in      bool
		current []string
	)
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case in && strings.HasPrefix(line, "```"):
			in = false
			blocks = append(blocks, strings.Join(current, "\n"))
		case in:
			current = append(current, line)
		case want && strings.HasPrefix(line, "```"):
			in, want, current = true, false, nil
		case strings.HasPrefix(line, "<!-- guide:"):
			m := guideMarker.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("%s: malformed marker %q", guideDoc, line)
			}
			want = m[1] == kind
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("%s has no block marked %q", guideDoc, kind)
	}
	return blocks
}

// sdkProxy writes a Go module proxy folder (GOPROXY=file://...) that serves
// the tree's sdk/go as version, so the vendor's project fetches the SDK as
// it would from the public proxy, and returns its folder.
func sdkProxy(t *testing.T, root, version string) string {
	t.Helper()
	const path = "github.com/arkadiuss/openfief/sdk/go"
	dir := filepath.Join(t.TempDir(), "goproxy")
	v := filepath.Join(dir, filepath.FromSlash(path), "@v")
	must(t, os.MkdirAll(v, 0o755))
	mod, err := os.ReadFile(filepath.Join(root, "sdk/go/go.mod"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(v, version+".mod"), mod, 0o644))
	info, err := json.Marshal(map[string]string{"Version": version, "Time": "2026-01-01T00:00:00Z"})
	must(t, err)
	must(t, os.WriteFile(filepath.Join(v, version+".info"), info, 0o644))
	must(t, os.WriteFile(filepath.Join(v, "list"), []byte(version+"\n"), 0o644))
	z, err := os.Create(filepath.Join(v, version+".zip"))
	must(t, err)
	must(t, modzip.CreateFromDir(z, module.Version{Path: path, Version: version}, filepath.Join(root, "sdk/go")))
	must(t, z.Close())
	return dir
}

// testGuide runs the plugin authors' guide as written: the vendor's blocks
// (plugin init, a build with crane, stock cosign, openfief plugin test) in
// a folder of their own with REGISTRY set to the plugin registry, then the
// owner's blocks against the cluster; the core then syncs the new plugin.
// Putting back the signers ConfigMap the guide replaced (without the
// vendor's key) then stops the plugin, as on any cluster (OF-50).
func testGuide(t *testing.T, e *platformEnv) {
	ctx := context.Background()
	doc, err := os.ReadFile(filepath.Join(e.root, guideDoc))
	must(t, err)
	vendor, owner := guideBlocks(t, doc, "vendor"), guideBlocks(t, doc, "owner")

	for _, tool := range []string{"cosign", "crane"} {
		if _, err := os.Stat(filepath.Join(e.root, ".bin", tool)); err != nil {
			t.Fatalf("%s is not in .bin: run make test-deps-heavy (%v)", tool, err)
		}
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "openfief"), "./cmd/openfief")
	build.Dir = e.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building openfief: %v\n%s", err, out)
	}

	saved, err := e.cs.CoreV1().ConfigMaps(plugins.Namespace).Get(ctx, "openfief-trusted-signers", metav1.GetOptions{})
	must(t, err)
	restored := false
	restore := func() error {
		cm, err := e.cs.CoreV1().ConfigMaps(plugins.Namespace).Get(ctx, saved.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Data = saved.Data
		_, err = e.cs.CoreV1().ConfigMaps(plugins.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
		restored = err == nil
		return err
	}
	t.Cleanup(func() {
		if !restored {
			if err := restore(); err != nil {
				t.Errorf("putting back %s: %v", saved.Name, err)
			}
		}
	})

	work := t.TempDir()
	script := "set -euo pipefail\n" + strings.Join(vendor, "\n") + "\n" + strings.Join(owner, "\n") + "\n"
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = work
	cmd.Env = append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+filepath.Join(e.root, ".bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"REGISTRY="+e.preg.bridge+"/vendor",
		"OPENFIEF_INSECURE_REGISTRIES="+e.preg.bridge,
		"KUBECONFIG="+e.kubeconfig,
		"GOPROXY=file://"+sdkProxy(t, e.root, plugininit.DevGoSDKVersion)+","+goEnv(t, "GOPROXY"),
		"GONOSUMDB=github.com/arkadiuss/openfief",
		"GOFLAGS=", "GOWORK=off", "CGO_ENABLED=0",
		"HOME="+work, "GOPATH="+goEnv(t, "GOPATH"), "GOCACHE="+goEnv(t, "GOCACHE"),
		"DOCKER_CONFIG="+filepath.Join(work, ".docker"),
		"COSIGN_PASSWORD=guide-test",
	)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("the guide's commands took %s:\n%s", time.Since(start).Round(time.Second), out)
	if err != nil {
		t.Fatalf("the guide's commands failed: %v", err)
	}
	defer openfief(t, e.kubeconfig, "plugin", "uninstall", "acme-rates", "--yes", "--wait", "60s")

	pod := runningPluginPod(t, e.cs, "acme-rates")
	if pod.Status.Phase != corev1.PodRunning {
		t.Fatalf("acme-rates' pod is %s", pod.Status.Phase)
	}
	st := waitCoreStatus(t, e, "acme-rates", 2*time.Minute, "the core to sync the guide's plugin and store its rows", func(s coreStatus) bool {
		return s.succeeded && s.rows > 0
	})
	t.Logf("the core synced acme-rates: %s", st.summary)
	if !strings.Contains(string(out), "acme") {
		t.Errorf("the guide's output never names the signer acme:\n%s", out)
	}

	// The owner's signers as they were, without acme: the operator stops
	// the vendor's plugin.
	must(t, restore())
	testutil.Eventually(t, time.Minute, "acme-rates refused and its pod gone once acme is no longer trusted", func() (bool, string) {
		_, status := e.cli(ctx, "plugin", "status", "acme-rates")
		pods, err := e.cs.CoreV1().Pods(plugins.Namespace).List(ctx, metav1.ListOptions{LabelSelector: plugins.LabelPluginName + "=acme-rates"})
		if err != nil {
			return false, err.Error()
		}
		// UntrustedSigner from an operator that kept the signature it read,
		// Unsigned from one that reads it again (docs/operator.md).
		refused := regexp.MustCompile(`SignatureVerified\s+False\s+(UntrustedSigner|Unsigned)\s`).MatchString(status)
		return refused && len(pods.Items) == 0, fmt.Sprintf("%d pods; %s", len(pods.Items), lastLines(status, "SignatureVerified"))
	})
}

// goEnv is one `go env` value of this machine.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	must(t, err)
	return strings.TrimSpace(string(out))
}
