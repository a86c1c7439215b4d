package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goodManifest = `{
  "capabilities": ["connector"],
  "egress": ["api.nbp.pl"]
}`

const dockerfile = `FROM golang:1.26 AS build
RUN go build
FROM gcr.io/distroless/static-debian12:nonroot
USER 65532:65532
LABEL io.openfief.plugin.manifest='{}'
`

func TestWriteThenCheck(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x")
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "manifest.json"), []byte(goodManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(false, dir); err == nil || !strings.Contains(err.Error(), "differs") {
		t.Fatalf("check of a stale label = %v, want a difference", err)
	}
	if err := run(true, dir); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := run(false, dir); err != nil {
		t.Fatalf("check after write: %v", err)
	}
	got, _ := os.ReadFile(filepath.Join(p, "Dockerfile"))
	want := `LABEL io.openfief.plugin.manifest='{"capabilities":["connector"],"egress":["api.nbp.pl"]}'`
	if !strings.Contains(string(got), want+"\n") {
		t.Errorf("Dockerfile:\n%s\nwant the line %s", got, want)
	}
}

func TestLabelRefuses(t *testing.T) {
	for name, m := range map[string]string{
		"not JSON":          `{`,
		"unknown field":     `{"capabilities":["connector"],"extra":1}`,
		"no capability":     `{"capabilities":[]}`,
		"a single quote":    `{"capabilities":["connector"],"configSchema":{"title":"it's"}}`,
		"a backslash":       `{"capabilities":["connector"],"configSchema":{"pattern":"\\d"}}`,
		"an IP egress host": `{"capabilities":["connector"],"egress":["10.0.0.1"]}`,
	} {
		if _, err := Label([]byte(m)); err == nil {
			t.Errorf("%s: Label accepted %s", name, m)
		}
	}
}

func TestWithLabelRefuses(t *testing.T) {
	for name, df := range map[string]string{
		"no label":             "FROM a\nUSER 65532:65532\n",
		"two labels":           dockerfile + "LABEL io.openfief.plugin.manifest='{}'\n",
		"label in build stage": "FROM a\nLABEL io.openfief.plugin.manifest='{}'\nFROM b\nUSER 65532:65532\n",
		"named user":           "FROM a\nUSER nonroot\nLABEL io.openfief.plugin.manifest='{}'\n",
		"user only in build":   "FROM a\nUSER 65532:65532\nFROM b\nLABEL io.openfief.plugin.manifest='{}'\n",
	} {
		if _, err := WithLabel([]byte(df), "{}"); err == nil {
			t.Errorf("%s: WithLabel accepted\n%s", name, df)
		}
	}
}

// TestProbeConstant: the check probe's manifest is compiled into the CLI
// through a generated constant, which check finds stale and write renews.
func TestProbeConstant(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "plugins")
	p := filepath.Join(dir, probePlugin)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "manifest.json"), []byte(goodManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(true, dir); err != nil {
		t.Fatalf("write: %v", err)
	}
	gen := filepath.Join(root, filepath.FromSlash(probeConstantFile))
	got, err := os.ReadFile(gen)
	if err != nil {
		t.Fatal(err)
	}
	if want := `const ProbeManifest = "{\"capabilities\":[\"connector\"],\"egress\":[\"api.nbp.pl\"]}"`; !strings.Contains(string(got), want+"\n") {
		t.Errorf("%s:\n%s\nwant the line %s", gen, got, want)
	}
	if err := os.WriteFile(filepath.Join(p, "manifest.json"), []byte(`{"capabilities":["view"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(true, dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "manifest.json"), []byte(goodManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(false, dir); err == nil || !strings.Contains(err.Error(), probeConstantFile) {
		t.Fatalf("check of a stale constant = %v, want it named", err)
	}
}
