package images

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRuntimeDeps checks which installed packages a TypeScript plugin's /app
// gets: the SDK's dependencies and required peers with theirs, each found as
// Node.js finds it (the nearest node_modules first), not its dev
// dependencies or optional peers.
func TestRuntimeDeps(t *testing.T) {
	sdk := t.TempDir()
	write := func(dir, manifest string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(sdk, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sdk, dir, "package.json"), []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".", `{"dependencies": {"jose": "6"}, "peerDependencies": {"@scope/rt": "^2", "opt": "1"},
		"peerDependenciesMeta": {"opt": {"optional": true}}, "devDependencies": {"tool": "1"}}`)
	write("node_modules/jose", `{}`)
	write("node_modules/@scope/rt", `{"dependencies": {"shared": "2"}}`)
	write("node_modules/@scope/rt/node_modules/shared", `{}`) // rt's own copy wins
	write("node_modules/shared", `{}`)
	write("node_modules/opt", `{}`)
	write("node_modules/tool", `{"dependencies": {"shared": "1"}}`)

	got, err := runtimeDeps(sdk)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i] = strings.TrimPrefix(filepath.ToSlash(got[i]), filepath.ToSlash(sdk)+"/")
	}
	want := []string{"node_modules/@scope/rt", "node_modules/@scope/rt/node_modules/shared", "node_modules/jose"}
	if !slices.Equal(got, want) {
		t.Errorf("runtimeDeps = %q, want %q", got, want)
	}

	// A required package that is not installed names the fix.
	write(".", `{"dependencies": {"missing": "1"}}`)
	if _, err := runtimeDeps(sdk); err == nil || !strings.Contains(err.Error(), "missing is not installed") || !strings.Contains(err.Error(), "make ts-deps") {
		t.Errorf("a missing dependency: %v, want an error naming it and make ts-deps", err)
	}
}

// TestRuntimeDepsOfTheSDK checks the real SDK's list, where its npm packages
// are installed: the protobuf and Connect runtimes (peers) and jose.
func TestRuntimeDepsOfTheSDK(t *testing.T) {
	root, err := FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	if err := TSDepsInstalled(root); err != nil {
		t.Skipf("sdk/ts's npm packages are not installed (make ts-deps): %v", err)
	}
	sdk := filepath.Join(root, tsSDK)
	got, err := runtimeDeps(sdk)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, d := range got {
		rel, _ := filepath.Rel(filepath.Join(sdk, "node_modules"), d)
		names[filepath.ToSlash(rel)] = true
	}
	for _, n := range []string{"@bufbuild/protobuf", "@connectrpc/connect", "@connectrpc/connect-node", "jose"} {
		if !names[n] {
			t.Errorf("runtimeDeps of sdk/ts lacks %s: %v", n, got)
		}
	}
	for _, n := range []string{"typescript", "prettier", "eslint", "@bufbuild/protoc-gen-es"} {
		if names[n] {
			t.Errorf("runtimeDeps of sdk/ts has the dev dependency %s", n)
		}
	}
}

// TestSDKTypePaths checks the "paths" a plugin is compiled with: every
// import the SDK exports with types, its subpaths too, points at the
// declarations in the SDK's copy; an export that would leave the package is
// refused.
func TestSDKTypePaths(t *testing.T) {
	root, err := FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(t.TempDir(), "node_modules", "@openfief", "sdk")
	got, err := sdkTypePaths(filepath.Join(root, tsSDK, "package.json"), pkg)
	if err != nil {
		t.Fatal(err)
	}
	for imp, decl := range map[string]string{
		"@openfief/sdk":              "dist/index.d.ts",
		"@openfief/sdk/delivery":     "dist/delivery/index.d.ts",
		"@openfief/sdk/connector/v1": "dist/gen/openfief/connector/v1/connector_pb.d.ts",
		"@openfief/sdk/view/v1":      "dist/gen/openfief/view/v1/view_pb.d.ts",
	} {
		if want := filepath.Join(pkg, filepath.FromSlash(decl)); len(got[imp]) != 1 || got[imp][0] != want {
			t.Errorf("paths[%q] = %q, want %q", imp, got[imp], want)
		}
	}
	if _, ok := got["@openfief/sdk/package.json"]; ok {
		t.Error("paths maps ./package.json, which has no declarations")
	}

	file := filepath.Join(t.TempDir(), "package.json")
	for name, manifest := range map[string]string{
		"a path out of the package": `{"name": "x", "exports": {".": {"types": "./../../etc/x.d.ts"}}}`,
		"a subpath without ./":      `{"name": "x", "exports": {".": {"types": "./a.d.ts"}, "sub": {"types": "./b.d.ts"}}}`,
		"no types for the package":  `{"name": "x", "exports": {"./sub": {"types": "./b.d.ts"}}}`,
	} {
		if err := os.WriteFile(file, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := sdkTypePaths(file, pkg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
