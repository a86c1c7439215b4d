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
			goRun(t, goBin, dir, "-mod=mod", "vet", "./...")
			goRun(t, goBin, dir, "-mod=mod", "test", "-count=1", "./...")
			goRun(t, goBin, dir, "-mod=mod", "build", "-trimpath", "-o", filepath.Join(t.TempDir(), "plugin"), ".")
		})
	}
}

// TestGoProjectVendored: a project on a checkout's SDK builds, as its
// Dockerfile builds it, where that folder is not (the build context holds
// only the project) once `go mod vendor` copied the SDK into it.
func TestGoProjectVendored(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go module: not in -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	sdk := filepath.Join(t.TempDir(), "sdk")
	if err := os.CopyFS(sdk, os.DirFS(filepath.Join(root, "sdk", "go"))); err != nil {
		t.Fatal(err)
	}
	o := Options{Name: "acme", Lang: Go, Kind: Connector, SDK: sdk}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := Write(dir, o); err != nil {
		t.Fatal(err)
	}
	goRun(t, goBin, dir, "-mod=mod", "mod", "tidy")
	goRun(t, goBin, dir, "-mod=mod", "mod", "vendor")
	if err := os.RemoveAll(sdk); err != nil {
		t.Fatal(err)
	}
	goRun(t, goBin, dir, "", "build", "-trimpath", "-o", filepath.Join(t.TempDir(), "plugin"), ".")
}

// goRun runs go with args in dir as a vendor's own module (no workspace),
// with GOFLAGS set to goflags, failing the test when it fails.
func goRun(t *testing.T, goBin, dir, goflags string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS="+goflags, "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
