//go:build heavy

package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestPrometheusRulesWithPromtool runs Prometheus' own rule checker on
// deploy/monitoring's PrometheusRule, so the rules are judged by the engine
// that will evaluate them: `promtool check rules` (syntax, templates, the
// linter's duplicates) and `promtool test rules` (every alert firing and
// not, prometheusrule_test.yaml). promtool is built from
// hack/tools/promtool by make test-deps-heavy; without it the test fails.
func TestPrometheusRulesWithPromtool(t *testing.T) {
	promtool := binTool(t, "promtool")
	dir := t.TempDir()
	tests := rulesFileFor(t, dir)
	for _, args := range [][]string{
		{"check", "rules", "--lint-fatal", filepath.Join(dir, "rules.yaml")},
		{"test", "rules", tests},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
			continue
		}
		t.Logf("promtool %v:\n%s", args, out)
	}
}

// binTool returns the path of name in .bin/ (or OPENFIEF_BIN_DIR), failing
// the test, never skipping it, when make has not built it.
func binTool(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("OPENFIEF_BIN_DIR")
	if dir == "" {
		root, err := testutil.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, ".bin")
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is not built (%v): run make test-deps-heavy (or make promtool), which builds it from hack/tools/promtool into .bin/", name, err)
	}
	return path
}
