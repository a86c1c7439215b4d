package plugininit

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGoProjects writes a Go connector and a Go view against this tree's
// SDK (--sdk) and runs what a vendor runs in them: go vet, go test and a
// static build. The project is its own module (no workspace); -mod=mod lets
// go complete go.mod and go.sum from the module cache or GOPROXY.
func TestGoProjects(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two Go modules: not in -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	for _, kind := range []Kind{Connector, View} {
		t.Run(string(kind), func(t *testing.T) {
			o := Options{Name: "acme-" + string(kind), Lang: Go, Kind: kind, SDK: filepath.Join(root, "sdk", "go")}
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if _, err := Write(dir, o); err != nil {
				t.Fatal(err)
			}
			env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
			for _, args := range [][]string{
				{"vet", "./..."},
				{"test", "-count=1", "./..."},
				{"build", "-trimpath", "-o", filepath.Join(t.TempDir(), "plugin"), "."},
			} {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				cmd := exec.CommandContext(ctx, goBin, args...)
				cmd.Dir, cmd.Env = dir, env
				out, err := cmd.CombinedOutput()
				cancel()
				if err != nil {
					t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
				}
			}
		})
	}
}
