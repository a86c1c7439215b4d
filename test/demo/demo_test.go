//go:build cluster

// Package demo runs `make demo`'s script, the README's first command, as a
// test: the main job must not break unnoticed.
package demo

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestMakeDemo runs hack/demo.sh from the repository's root and checks that
// it finished every step of the lifecycle with exit status 0.
func TestMakeDemo(t *testing.T) {
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "demo.sh"))
	cmd.Dir = root
	cmd.WaitDelay = 30 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("hack/demo.sh ran for %s", time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("hack/demo.sh: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{
		"== 1. Check the demo image's signature",
		"== 2. Install it",
		"== 3. Approve what it asks for (Running)",
		"== 4. openfief-core calls nbp-fx's Sync",
		"== 5. Upgrade to a version that asks for one more host",
		"== 6. Approve the new host",
		"== 7. Revoke the grant",
		"== 8. Uninstall",
		"== demo finished in ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, text)
		}
	}
	if !regexp.MustCompile(`Last sync: .*succeeded`).MatchString(text) {
		t.Errorf("the demo's output shows no successful sync:\n%s", text)
	}
}
