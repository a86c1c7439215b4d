package images

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/arkadiuss/openfief/internal/boundedfile"
)

// tsSDK is the TypeScript SDK's folder, relative to the module root.
const tsSDK = "sdk/ts"

// tsDepsStamp is the file hack/build/ts-deps.sh writes into node_modules
// after `npm ci`: the SHA-256 of the package-lock.json it installed from.
const tsDepsStamp = "node_modules/.openfief-lock.sum"

// TSDepsInstalled reports, as an error naming the make target that fixes
// it, whether sdk/ts's npm packages under root are missing or older than
// its package-lock.json. The build reads them and never installs them:
// `make ts-deps` does (and `make test-deps`, which the test targets run).
func TSDepsInstalled(root string) error {
	sdk := filepath.Join(root, tsSDK)
	lock, err := fileSHA256(filepath.Join(sdk, "package-lock.json"))
	if err != nil {
		return err
	}
	stamp, err := os.ReadFile(filepath.Join(sdk, tsDepsStamp))
	if err != nil || strings.TrimSpace(string(stamp)) != lock {
		return fmt.Errorf("%s's npm packages are missing or older than its package-lock.json: run make ts-deps", tsSDK)
	}
	return nil
}

// TSPluginApp writes the /app of the TypeScript plugin whose sources are in
// src (relative to root: main.ts and the modules it imports, such as
// sdk/ts/examples/fx-rates) into out, which must be empty or missing:
//
//	out/main.js, ...                  src compiled by sdk/ts's TypeScript;
//	out/package.json                  {"type": "module"}, so Node.js loads
//	                                  the .js files as ES modules;
//	out/node_modules/@openfief/sdk/   the SDK compiled from sdk/ts/src, with
//	                                  its package.json, LICENSE and README;
//	out/node_modules/...              the SDK's dependencies and its peer
//	                                  dependencies (the protobuf and Connect
//	                                  runtimes, which a plugin installs
//	                                  beside the SDK), with theirs, as npm ci
//	                                  installed them from
//	                                  sdk/ts/package-lock.json; nothing else.
//
// It writes nothing under sdk/ts, so it can run while make test-ts builds
// there. The npm packages must be installed (TSDepsInstalled).
func TSPluginApp(ctx context.Context, root, src, out string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	sdk := filepath.Join(root, tsSDK)
	src = filepath.Join(root, src)
	if _, err := os.Stat(filepath.Join(src, "main.ts")); err != nil {
		return fmt.Errorf("ts plugin app: %s has no main.ts", src)
	}
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		return fmt.Errorf("ts plugin app: %s is not empty", out)
	}
	if err := TSDepsInstalled(root); err != nil {
		return err
	}
	out, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	tsc := filepath.Join(sdk, "node_modules", ".bin", "tsc")
	mods := filepath.Join(out, "node_modules")
	pkg := filepath.Join(mods, "@openfief", "sdk")

	// The SDK, as npm pack would ship it: dist/, package.json, LICENSE, README.
	if _, err := runTool(ctx, "", tsc, "-p", filepath.Join(sdk, "tsconfig.json"), "--outDir", filepath.Join(pkg, "dist")); err != nil {
		return err
	}
	for _, f := range []string{"package.json", "LICENSE", "README.md"} {
		if err := copyTree(filepath.Join(sdk, f), filepath.Join(pkg, f)); err != nil {
			return err
		}
	}

	// Its dependencies and peer dependencies, and theirs, copied as
	// installed. The lock file marks the peers dev (the SDK builds against
	// them), so npm ls --omit=dev would leave them out.
	deps, err := runtimeDeps(sdk)
	if err != nil {
		return err
	}
	installed := filepath.Join(sdk, "node_modules") + string(filepath.Separator)
	for _, dep := range deps {
		rel, ok := strings.CutPrefix(dep, installed)
		if !ok {
			return fmt.Errorf("ts plugin app: dependency %s is outside %s", dep, installed)
		}
		if err := copyTree(dep, filepath.Join(mods, rel)); err != nil {
			return err
		}
	}

	// The plugin, its "@openfief/sdk" and the SDK's subpaths
	// ("@openfief/sdk/delivery") resolved to the copy above.
	paths, err := sdkTypePaths(filepath.Join(sdk, "package.json"), pkg)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "openfief-ts-app-config-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	config, err := json.MarshalIndent(map[string]any{
		"extends": filepath.Join(sdk, "tsconfig.json"),
		"compilerOptions": map[string]any{
			"rootDir":     src,
			"outDir":      out,
			"declaration": false,
			"typeRoots":   []string{filepath.Join(sdk, "node_modules", "@types")},
			"paths":       paths,
		},
		"include": []string{filepath.Join(src, "*.ts")},
	}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "tsconfig.json"), config, 0o644); err != nil {
		return err
	}
	if _, err := runTool(ctx, "", tsc, "-p", filepath.Join(tmp, "tsconfig.json")); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "package.json"), []byte("{\n  \"private\": true,\n  \"type\": \"module\"\n}\n"), 0o644)
}

// sdkTypePaths maps every import the SDK's package.json (file) exports
// with types, such as "@openfief/sdk" and "@openfief/sdk/delivery", to
// its declarations under pkg, the SDK's copy: TypeScript's "paths" for a
// plugin whose sources sit outside any node_modules that holds the SDK.
func sdkTypePaths(file, pkg string) (map[string][]string, error) {
	b, err := boundedfile.Read(file, 1<<20)
	if err != nil {
		return nil, err
	}
	var sdk struct {
		Name    string                     `json:"name"`
		Exports map[string]json.RawMessage `json:"exports"`
	}
	if err := json.Unmarshal(b, &sdk); err != nil {
		return nil, fmt.Errorf("ts plugin app: %s: %w", file, err)
	}
	paths := map[string][]string{}
	for sub, raw := range sdk.Exports {
		var cond struct {
			Types string `json:"types"`
		}
		if json.Unmarshal(raw, &cond) != nil || cond.Types == "" {
			continue // "./package.json": a file, no declarations
		}
		rel, ok := strings.CutPrefix(sub, ".")
		decl := filepath.FromSlash(strings.TrimPrefix(cond.Types, "./"))
		if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) || !filepath.IsLocal(decl) {
			return nil, fmt.Errorf("ts plugin app: %s: exports %q names types %q: want \"./SUBPATH\" and a path inside the package", file, sub, cond.Types)
		}
		paths[sdk.Name+rel] = []string{filepath.Join(pkg, decl)}
	}
	if len(paths[sdk.Name]) == 0 {
		return nil, fmt.Errorf("ts plugin app: %s exports no types for %q", file, sdk.Name)
	}
	return paths, nil
}

// copyTree copies the file, link or folder from into to, as cp -R does:
// links stay links, files keep their execute bits, folders are created as
// needed.
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			return os.MkdirAll(dst, 0o755)
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			return os.Symlink(target, dst)
		case mode.IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			return os.WriteFile(dst, data, mode.Perm())
		default:
			return fmt.Errorf("%s is neither a folder, a file nor a link (%v)", p, mode.Type())
		}
	})
}

// runtimeDeps lists the folder of every package the SDK in sdk needs at run
// time: its dependencies and its peer dependencies that are not optional,
// and theirs, each resolved as Node.js resolves a bare import from its
// dependent's folder (node_modules of that folder, then of each parent, up
// to sdk). The list is sorted.
func runtimeDeps(sdk string) ([]string, error) {
	seen := map[string]bool{}
	var walk func(dir string) error
	walk = func(dir string) error {
		names, err := runtimeNames(filepath.Join(dir, "package.json"))
		if err != nil {
			return err
		}
		for _, name := range names {
			p, err := resolvePackage(sdk, dir, name)
			if err != nil {
				return err
			}
			if seen[p] {
				continue
			}
			seen[p] = true
			if err := walk(p); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(sdk); err != nil {
		return nil, err
	}
	deps := slices.Sorted(maps.Keys(seen))
	return deps, nil
}

// runtimeNames reads a package.json and returns the names under
// dependencies and the peerDependencies peerDependenciesMeta does not mark
// optional, sorted.
func runtimeNames(file string) ([]string, error) {
	b, err := boundedfile.Read(file, 1<<20)
	if err != nil {
		return nil, err
	}
	var pkg struct {
		Dependencies         map[string]string `json:"dependencies"`
		PeerDependencies     map[string]string `json:"peerDependencies"`
		PeerDependenciesMeta map[string]struct {
			Optional bool `json:"optional"`
		} `json:"peerDependenciesMeta"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return nil, fmt.Errorf("ts plugin app: %s: %w", file, err)
	}
	names := slices.Collect(maps.Keys(pkg.Dependencies))
	for n := range pkg.PeerDependencies {
		if !pkg.PeerDependenciesMeta[n].Optional {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// resolvePackage finds package name as Node.js does from folder from: in
// from/node_modules, then in each parent's, never above sdk.
func resolvePackage(sdk, from, name string) (string, error) {
	for dir := from; ; dir = filepath.Dir(dir) {
		p := filepath.Join(dir, "node_modules", name)
		if _, err := os.Stat(filepath.Join(p, "package.json")); err == nil {
			return p, nil
		}
		if dir == sdk || dir == filepath.Dir(dir) {
			return "", fmt.Errorf("ts plugin app: %s is not installed for %s: run make ts-deps", name, from)
		}
	}
}
