package main

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// claimsRepo is a small repository whose documents make claims about its
// code: docs holds the documents by name, the rest is fixed.
func claimsRepo(docs map[string]string) fstest.MapFS {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	fsys := fstest.MapFS{
		"Makefile":                         file(".PHONY: ts-image\nts-image: ## the image\n\tgo run ./hack/images\nVAR := x\nbuild test: deps\n"),
		"internal/release/release.go":      file("package release\n\n// CatalogPlugins are pinned.\nvar CatalogPlugins = []string{\"a\"}\n\ntype Builder struct{}\n\nfunc (b *Builder) Build() {}\n\nfunc Write() {}\n"),
		"internal/release/release_test.go": file("package release\n\nfunc TestOnlyInTests(t *testing.T) {}\n\nvar HiddenInTests = 1\n"),
		"sdk/ts/examples/fx-rates/main.ts": file(""),
		// Indented, so that no line of this file begins "func Test" but its own tests'.
		"internal/cli/platform_test.go": file(`package cli

	func TestLifecycle(t *testing.T) {
		run := func(args ...string) {}
		run("platform", "install", "--overlay", dir, "--dry-run")
		run("platform", "install", "--overlay", dir, "--timeout", "3m")
		openfief(t, k, runOpts{}, "check", "--pre")
		run("plugin", "approve", name, "--yes")
		args := []string{"platform", "status", "-o", "json"}
		_ = args
		expect(t, run("platform", "uninstall", "--yes=true", "--delete-data"), "uninstalled")
	}

	func helper() { run("check", "--isolation") }
`),
	}
	for name, text := range docs {
		fsys[name] = file(text)
	}
	return fsys
}

// problems runs Check on the documents of fsys and returns what it found.
func problems(t *testing.T, fsys fstest.MapFS) []string {
	t.Helper()
	docs, err := Documents(fsys)
	if err != nil {
		t.Fatal(err)
	}
	found, err := Check(fsys, docs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range found {
		got = append(got, p.String())
	}
	return got
}

func TestStatusMarkers(t *testing.T) {
	for name, tc := range map[string]struct {
		doc  string
		want []string
	}{
		"what is missing is missing": {doc: strings.Join([]string{
			"Not built: `internal/python`, `make py-image`, `release.Publish`, `TestPython`, `--python`.",
			"**Not done:** the `openfief python` command.",
		}, "\n")},
		"a path that exists": {
			doc:  "Not done: the example's image; the example is in `sdk/ts/examples/fx-rates`.",
			want: []string{"docs/decisions.md:1: `sdk/ts/examples/fx-rates`: the paragraph is marked \"Not done:\", but the path sdk/ts/examples/fx-rates exists: update the status"},
		},
		"a make target, a declaration, a method and a test": {
			doc: strings.Join([]string{
				"Some text.",
				"",
				"Planned: `make ts-image`, then `release.CatalogPlugins` and",
				"`release.Builder.Build()`, checked by `TestLifecycle`.",
			}, "\n"),
			want: []string{
				"docs/decisions.md:3: `make ts-image`: the paragraph is marked \"Planned:\", but the Makefile's target ts-image exists: update the status",
				"docs/decisions.md:3: `release.CatalogPlugins`: the paragraph is marked \"Planned:\", but the declaration CatalogPlugins in internal/release exists: update the status",
				"docs/decisions.md:4: `release.Builder.Build()`: the paragraph is marked \"Planned:\", but the declaration Builder.Build in internal/release exists: update the status",
				"docs/decisions.md:4: `TestLifecycle`: the paragraph is marked \"Planned:\", but the test TestLifecycle exists: update the status",
			},
		},
		"declarations only in tests do not count": {doc: "Not built: `release.HiddenInTests`."},
		"the paragraph ends at a blank line, a heading or a list item": {doc: strings.Join([]string{
			"Not built: `release.Missing`.",
			"",
			"Built: `release.Write` and `make ts-image`.",
			"- Not done: `release.Missing`",
			"- `make test`",
			"Not done: `release.Missing`",
			"## `release.Write`",
		}, "\n")},
		"not a marker": {doc: strings.Join([]string{
			"Not built at the time: `make ts-image`. Status: built, `release.Write`.",
			"```",
			"Not built: `make ts-image`",
			"```",
		}, "\n")},
	} {
		t.Run(name, func(t *testing.T) {
			got := problems(t, claimsRepo(map[string]string{"docs/decisions.md": tc.doc}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCommandBlocks(t *testing.T) {
	const marker = "<!-- doclinks: TestLifecycle runs each openfief command of the next block -->"
	for name, tc := range map[string]struct {
		doc  string
		want []string
	}{
		"every command run": {doc: strings.Join([]string{
			"`TestLifecycle` runs these commands:",
			"",
			marker,
			"",
			"```sh",
			"make release-overlay OUT=release   # not openfief: not compared",
			"openfief platform install --overlay release --dry-run > platform.yaml",
			"openfief platform install --overlay release --timeout 3m",
			"openfief check --pre                # before",
			"openfief plugin approve fx --yes",
			"openfief platform status -o json | jq .",
			"openfief platform uninstall --yes --delete-data",
			"```",
		}, "\n")},
		"a command the test does not run": {
			doc: strings.Join([]string{
				marker,
				"```sh",
				"openfief platform install --overlay release",
				"openfief check --isolation --probe-image r/p@sha256:<hex>   # only a helper runs it",
				"openfief platform install --overlay release --api-server-cidr 10.0.0.1",
				"openfief platform upgrade --overlay next",
				"openfief plugin revoke fx",
				"```",
			}, "\n"),
			want: []string{
				"README.md:4: openfief check --isolation --probe-image r/p@sha256:<hex>: TestLifecycle (internal/cli/platform_test.go) does not run this command, which the marker says it runs: run it there, or take it out of the block",
				"README.md:5: openfief platform install --overlay release --api-server-cidr 10.0.0.1: TestLifecycle (internal/cli/platform_test.go) does not run this command, which the marker says it runs: run it there, or take it out of the block",
				"README.md:6: openfief platform upgrade --overlay next: TestLifecycle (internal/cli/platform_test.go) does not run this command, which the marker says it runs: run it there, or take it out of the block",
				"README.md:7: openfief plugin revoke fx: TestLifecycle (internal/cli/platform_test.go) does not run this command, which the marker says it runs: run it there, or take it out of the block",
			},
		},
		"a test that is not there": {
			doc:  "<!-- doclinks: TestGone runs each openfief command of the next block -->\n```sh\nopenfief check\n```\n",
			want: []string{"README.md:1: TestGone: no test function TestGone in the repository"},
		},
		"a marker without a block, or with no command": {
			doc: strings.Join([]string{marker, "Text.", "", marker, "```sh", "make test", "```", marker}, "\n"),
			want: []string{
				"README.md:1: TestLifecycle: the marker is not followed by a fenced block",
				"README.md:4: TestLifecycle: the block after the marker holds no openfief command",
				"README.md:8: TestLifecycle: the marker is not followed by a fenced block",
			},
		},
		"a claim without a marker, before or after the block": {
			doc: strings.Join([]string{
				"`TestLifecycle` runs exactly these commands:",
				"",
				"```sh",
				"openfief check",
				"```",
				"",
				"```sh",
				"openfief check",
				"```",
				"These are the commands `TestOther` runs.",
			}, "\n"),
			want: []string{
				"README.md:3: `TestLifecycle`: the text beside this block says the test runs its commands, but no doclinks marker holds them together; put <!-- doclinks: TestLifecycle runs each PROGRAM command of the next block --> before the block",
				"README.md:7: `TestOther`: the text beside this block says the test runs its commands, but no doclinks marker holds them together; put <!-- doclinks: TestOther runs each PROGRAM command of the next block --> before the block",
			},
		},
		"a claim beside another block, held by a marked one": {doc: strings.Join([]string{
			marker,
			"```sh",
			"openfief check --pre",
			"```",
			"",
			"```sh",
			"openfief check --isolation",
			"```",
			"`TestLifecycle` runs the commands of the first block.",
		}, "\n")},
	} {
		t.Run(name, func(t *testing.T) {
			got := problems(t, claimsRepo(map[string]string{"README.md": tc.doc}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
