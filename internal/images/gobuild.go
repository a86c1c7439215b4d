package images

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// GoFlags are the build flags of every binary: no cgo (set in the
// environment), paths trimmed, no VCS stamp (the revision is an image
// annotation, and an edited tree would stamp differently), no symbol table
// or DWARF. The binaries have no version variable for -X to set; Go records
// its own version and these settings in the binary (go version -m).
var GoFlags = []string{"-trimpath", "-buildvcs=false", "-ldflags=-s -w"}

// goEnv is the environment of the go command for platform p: the caller's,
// with every setting that changes the output fixed, GOFLAGS emptied so the
// caller's flags cannot add to GoFlags, and the baseline microarchitecture
// of each architecture.
func goEnv(p v1.Platform) []string {
	return append(os.Environ(),
		"CGO_ENABLED=0",
		"GOOS="+p.OS,
		"GOARCH="+p.Architecture,
		"GOAMD64=v1",
		"GOARM64=v8.0",
		"GOFLAGS=",
		"GOEXPERIMENT=",
	)
}

// compile builds every spec's package for p into outDir with one go
// command, so packages compile in parallel and each only once, and returns
// nothing but an error: the binaries are outDir/<Name>. The Go build cache
// makes a second build of unchanged sources a link only.
func compile(ctx context.Context, goCmd, root string, p v1.Platform, specs []Spec, outDir string) error {
	args := append([]string{"build"}, GoFlags...)
	args = append(args, "-o", outDir+string(os.PathSeparator))
	for _, s := range specs {
		if path.Base(s.Package) != s.Name {
			return fmt.Errorf("image %s: package %s would build a binary named %s", s.Name, s.Package, path.Base(s.Package))
		}
		args = append(args, s.Package)
	}
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = root
	cmd.Env = goEnv(p)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s: %w\n%s", p, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// GoVersion is the version of the go command that builds the binaries in
// root (the toolchain go.work or go.mod selects there).
func GoVersion(ctx context.Context, goCmd, root string) (string, error) {
	cmd := exec.CommandContext(ctx, goCmd, "env", "GOVERSION")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
