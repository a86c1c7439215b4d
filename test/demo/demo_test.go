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

// TestMakeDemo runs hack/dev/demo.sh from the repository's root and checks that
// it finished every step of the lifecycle with exit status 0, and that the
// view exported the rates nbp-fx stored as a CSV file.
func TestMakeDemo(t *testing.T) {
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "dev", "demo.sh"))
	cmd.Dir = root
	cmd.WaitDelay = 30 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("hack/dev/demo.sh ran for %s", time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("hack/dev/demo.sh: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{
		"== 1. Check the demo image's signature",
		"== 2. Install it",
		"== 3. Approve what it asks for (Running)",
		"== 4. openfief-core calls nbp-fx's Sync",
		"== 5. Check the view's image",
		"== 6. Give it your WebDAV login as the Secret webdav-credentials",
		"== 7. Install the view, pointed at your WebDAV folder",
		"== 8. Approve it, naming your server's host",
		"== 9. openfief-core exports the rates nbp-fx stored to the view",
		"== 10. Upgrade nbp-fx to a version that asks for one more host",
		"== 11. Approve nbp-fx's new host",
		"== 12. Revoke nbp-fx's grant",
		"== 13. Uninstall nbp-fx",
		"== 14. Uninstall the view with --purge",
		"== demo finished in ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, text)
		}
	}
	if !regexp.MustCompile(`Last sync: .*succeeded`).MatchString(text) {
		t.Errorf("the demo's output shows no successful sync:\n%s", text)
	}
	// The view's export: a successful run, and the CSV file it wrote into
	// the WebDAV stand-in's folder, printed with its header and the rates.
	if !regexp.MustCompile(`Last export: .*succeeded`).MatchString(text) {
		t.Errorf("the demo's output shows no successful export:\n%s", text)
	}
	csv := regexp.MustCompile(`(?m)^\$ head -n 5 \S+/webdav/openfief/[0-9]{4}/[0-9]{4}-[0-9]{2}-fx-rates\.csv\n` +
		`sequence,source,institution,institution_name,date,base_currency,quote_currency,rate,source_ref\n` +
		`[0-9]+,fx,nbp,Narodowy Bank Polski,[0-9-]+,[A-Z]{3},PLN,[0-9.]+,`)
	if !csv.MatchString(text) {
		t.Errorf("the demo's output shows no FX rates CSV written by the view:\n%s", text)
	}
	// The stand-in's password is never shown (it is read from a file).
	if strings.Contains(text, "--from-literal") {
		t.Errorf("the demo passes a credential on the command line:\n%s", text)
	}
}
