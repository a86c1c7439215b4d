package images

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"slices"
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

// compile builds every spec's package for p into outDir and returns nothing
// but an error: the binaries are outDir/<Name>. The specs without link
// strings build in one go command, so their packages compile in parallel
// and each only once; a spec with link strings (Options.LinkStrings) links
// in a command of its own, which reuses the same compiled packages. The Go
// build cache makes a second build of unchanged sources a link only.
func compile(ctx context.Context, goCmd, root string, p v1.Platform, specs []Spec, link map[string]map[string]string, outDir string) error {
	var shared []Spec
	for _, s := range specs {
		if path.Base(s.Package) != s.Name {
			return fmt.Errorf("image %s: package %s would build a binary named %s", s.Name, s.Package, path.Base(s.Package))
		}
		if len(link[s.Name]) == 0 {
			shared = append(shared, s)
		}
	}
	for name := range link {
		if !slices.ContainsFunc(specs, func(s Spec) bool { return s.Name == name }) {
			return fmt.Errorf("link strings for image %q, which this build does not make", name)
		}
	}
	if len(shared) > 0 {
		if err := goBuild(ctx, goCmd, root, p, GoFlags, shared, outDir); err != nil {
			return err
		}
	}
	for _, s := range specs {
		vars := link[s.Name]
		if len(vars) == 0 {
			continue
		}
		flags, err := linkFlags(vars)
		if err != nil {
			return fmt.Errorf("image %s: %w", s.Name, err)
		}
		if err := goBuild(ctx, goCmd, root, p, flags, []Spec{s}, outDir); err != nil {
			return err
		}
	}
	return nil
}

// unsafeInLDFlags are the characters the go command's -ldflags splitting
// would act on.
const unsafeInLDFlags = " \t\r\n'\"\\"

// linkFlags are GoFlags with -X for each variable, in symbol order.
func linkFlags(vars map[string]string) ([]string, error) {
	for i, f := range GoFlags {
		if ldflags, ok := strings.CutPrefix(f, "-ldflags="); ok {
			flags := slices.Clone(GoFlags)
			for _, sym := range slices.Sorted(maps.Keys(vars)) {
				val := vars[sym]
				if sym == "" || strings.ContainsAny(sym, unsafeInLDFlags+"=") || strings.ContainsAny(val, unsafeInLDFlags) {
					return nil, fmt.Errorf("link string %q: the symbol may not be empty or hold spaces, quotes or '=', nor the value spaces or quotes", sym)
				}
				ldflags += " -X " + sym + "=" + val
			}
			flags[i] = "-ldflags=" + ldflags
			return flags, nil
		}
	}
	return nil, fmt.Errorf("GoFlags has no -ldflags to add -X to")
}

func goBuild(ctx context.Context, goCmd, root string, p v1.Platform, flags []string, specs []Spec, outDir string) error {
	args := append([]string{"build"}, flags...)
	args = append(args, "-o", outDir+string(os.PathSeparator))
	for _, s := range specs {
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
