//go:build heavy

package catalog

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLinkedWithX builds a program with and without -X Symbol=Encode(file)
// and runs it: Symbol must name the variable Load reads, or a release
// would silently ship the empty catalog.
func TestLinkedWithX(t *testing.T) {
	file := releaseCatalog(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name, ldflags, want string
	}{
		{"development", "-s -w", "entries=0 released=false"},
		{"release", "-s -w -X " + Symbol + "=" + Encode(file), "nbp-fx sha256:" + strings.Repeat("ab", 32) + "\nentries=1 released=true"},
	} {
		bin := filepath.Join(dir, tc.name)
		build := exec.Command("go", "build", "-ldflags", tc.ldflags, "-o", bin, "./testdata/show")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("%s: go build: %v\n%s", tc.name, err, out)
		}
		out, err := exec.Command(bin).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.name, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("%s build printed %q, want %q", tc.name, got, tc.want)
		}
	}
}
