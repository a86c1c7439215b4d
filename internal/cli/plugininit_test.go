package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/arkadiuss/openfief/internal/plugininit"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestPluginInit writes a project, checks that `plugin label` accepts its
// manifest, and that a second run into another folder writes the same bytes.
// internal/plugininit's tests build and test the projects themselves.
func TestPluginInit(t *testing.T) {
	base := t.TempDir()
	one, two := filepath.Join(base, "one"), filepath.Join(base, "two")
	for _, dir := range []string{one, two} {
		r := openfief(t, nil, runOpts{}, "plugin", "init", "acme-rates", "--lang", "go", "--kind", "view", "--dir", dir)
		expect(t, r, ExitOK, "Wrote the Go view acme-rates into "+dir, "main.go", "go mod edit -replace "+plugininit.GoSDKModule+"=PATH/sdk/go", "README.md")
	}
	entries, err := os.ReadDir(one)
	if err != nil || len(entries) < 5 {
		t.Fatalf("wrote %v, %v", entries, err)
	}
	for _, e := range entries {
		a, errA := os.ReadFile(filepath.Join(one, e.Name()))
		b, errB := os.ReadFile(filepath.Join(two, e.Name()))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs (%v, %v)", e.Name(), errA, errB)
		}
	}
	raw, err := os.ReadFile(filepath.Join(one, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := plugins.ManifestLabelValue(raw)
	if err != nil {
		t.Fatal(err)
	}
	r := openfief(t, nil, runOpts{}, "plugin", "label", one)
	expect(t, r, ExitOK, `"capabilities":["view"]`)
	if r.out != want+"\n" {
		t.Errorf("plugin label: %s, want %s", r.out, want)
	}

	// --sdk writes the replace, and no hint is needed then.
	sdkDir := filepath.Join(base, "sdk")
	r = openfief(t, nil, runOpts{}, "plugin", "init", "acme-rates", "--lang", "go", "--dir", sdkDir, "--sdk", filepath.Join("..", "..", "sdk", "go"))
	expect(t, r, ExitOK, "Wrote the Go connector acme-rates")
	gomod, err := os.ReadFile(filepath.Join(sdkDir, "go.mod"))
	if err != nil || !bytes.Contains(gomod, []byte("replace "+plugininit.GoSDKModule+" => /")) || bytes.Contains([]byte(r.out), []byte("go mod edit")) {
		t.Errorf("--sdk: go.mod\n%s\noutput\n%s", gomod, r)
	}
}

func TestPluginInitRefuses(t *testing.T) {
	full := t.TempDir()
	writeFile(t, filepath.Join(full, "notes.txt"), "mine")
	dir := filepath.Join(t.TempDir(), "new")
	for name, tc := range map[string]struct {
		args []string
		code int
		want []string
	}{
		"an upper-case name":  {[]string{"Acme", "--lang", "go", "--dir", dir}, ExitInvalid, []string{"NAME: ", `"Acme" is not a lower-case DNS label`, "Plugin resource's name"}},
		"a long name":         {[]string{"a234567890123456789012345678901234567890123456789012345678", "--lang", "go", "--dir", dir}, ExitInvalid, []string{"NAME: ", "58 characters, at most 56"}},
		"a non-empty folder":  {[]string{"acme", "--lang", "go", "--dir", full}, ExitUsage, []string{"--dir " + full, "not empty", "new or empty folder"}},
		"no language":         {[]string{"acme", "--dir", dir}, ExitUsage, []string{"--lang: required: go or ts"}},
		"an unknown language": {[]string{"acme", "--lang", "rust", "--dir", dir}, ExitUsage, []string{`--lang: "rust"`, "go or ts"}},
		"an unknown kind":     {[]string{"acme", "--lang", "go", "--kind", "exporter", "--dir", dir}, ExitUsage, []string{`--kind: "exporter"`, "connector or view"}},
		"not an SDK":          {[]string{"acme", "--lang", "go", "--sdk", full, "--dir", dir}, ExitUsage, []string{"--sdk: ", "sdk/go folder of an OpenFief checkout"}},
		"no NAME":             {[]string{"--lang", "go"}, ExitUsage, []string{"takes 1 argument"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := openfief(t, nil, runOpts{}, append([]string{"plugin", "init"}, tc.args...)...)
			expect(t, r, tc.code, tc.want...)
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("a refused init wrote %s", dir)
			}
			if got, _ := os.ReadFile(filepath.Join(full, "notes.txt")); string(got) != "mine" {
				t.Errorf("a refused init changed the folder's file")
			}
		})
	}
}
