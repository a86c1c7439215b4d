package main

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// repo is a small repository: two documents that point at what exists and at
// what does not.
func repo() fstest.MapFS {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	return fstest.MapFS{
		"README.md": file(strings.Join([]string{
			"# Top",
			"See [the docs](docs/guide.md), [a heading](docs/guide.md#how-it-works), [the licence](LICENSE).",
			"Broken: [gone](docs/gone.md) and [no heading](docs/guide.md#nowhere) and [out](../x.md).",
			"Fine: [web](https://example.com/a.md), [mail](mailto:a@b.c), [self](#top).",
			"Paths: `internal/plugins`, `internal/plugins/compile.go:42`, `./deploy/core/...`, `internal/plugins.Compile`.",
			"Broken paths: `internal/nothere`, `deploy/core/gone.yaml`, `v1alpha1/missing_types.go`.",
			"Not paths: `make verify`, `signers.json`, `plugins/<name>`, `deploy/*.yaml`, `--flag=x`, `/healthz`,",
			"`plugins/status`, `example.com/x`, `k8s.io/api/core/v1`.",
			"```",
			"cat docs/gone.md `internal/nothere` [x](gone.md)",
			"```",
		}, "\n")),
		"docs/guide.md": file(strings.Join([]string{
			"# Guide",
			"## How it works",
			"Up: [readme](../README.md), [sibling](other.md), `api/v1alpha1/plugin_types.go`, `v1alpha1/plugin_types.go`.",
			"[ref]: ./missing.md",
		}, "\n")),
		"LICENSE":                         file(""),
		"internal/plugins/compile.go":     file(""),
		"deploy/core/kustomization.yaml":  file(""),
		"api/v1alpha1/plugin_types.go":    file(""),
		"plugins/nbp-fx/manifest.json":    file(""),
		"sdk/go/README.md":                file("[up](../../README.md#top)"),
		".git/HEAD":                       file(""),
		"plugins/nbp-fx/internal/main.go": file(""),
	}
}

func TestCheck(t *testing.T) {
	fsys := repo()
	docs, err := Documents(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"README.md", "docs/guide.md", "sdk/go/README.md"}, docs); diff != "" {
		t.Fatalf("Documents (-want +got):\n%s", diff)
	}
	problems, err := Check(fsys, docs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	want := []string{
		"README.md:3: docs/gone.md: no such file or folder",
		"README.md:3: docs/guide.md#nowhere: no heading of docs/guide.md has the anchor #nowhere",
		"README.md:3: ../x.md: the link leaves the repository",
		"README.md:6: `internal/nothere`: names no file or folder of the repository",
		"README.md:6: `deploy/core/gone.yaml`: names no file or folder of the repository",
		"README.md:6: `v1alpha1/missing_types.go`: names no file or folder of the repository",
		"docs/guide.md:3: other.md: no such file or folder",
		"docs/guide.md:4: ./missing.md: no such file or folder",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestHeadingAnchors(t *testing.T) {
	doc := "<a id=\"of-12\"></a>\n# OF-12: the dashboard, guarded\n## openfief dashboard [--port N] [--no-browser]\n## Scale\n## Scale\n```\n# not a heading\n```\n"
	got := headingAnchors([]byte(doc))
	for _, a := range []string{"of-12", "of-12-the-dashboard-guarded", "openfief-dashboard---port-n---no-browser", "scale", "scale-1"} {
		if !got[a] {
			t.Errorf("no anchor %q in %v", a, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("a line in a code block made an anchor: %v", got)
	}
}
