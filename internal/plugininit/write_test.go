package plugininit

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// root is the repository's root, from this package's folder.
const root = "../.."

func paths(files []File) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	return out
}

// TestFiles checks each project's list of files, that the same options give
// the same bytes, and that the manifest is one the operator accepts, with
// the kind's capability.
func TestFiles(t *testing.T) {
	want := map[string][]string{
		"go/connector": {".dockerignore", "Dockerfile", "README.md", "connector.go", "connector_test.go", "go.mod", "main.go", "manifest.json"},
		"go/view":      {".dockerignore", "Dockerfile", "README.md", "go.mod", "main.go", "manifest.json", "view.go", "view_test.go"},
		"ts/connector": {".dockerignore", ".gitignore", "Dockerfile", "README.md", "manifest.json", "package.json", "src/main.ts", "src/plugin.ts", "test/plugin.test.ts", "tsconfig.json", "tsconfig.test.json"},
		"ts/view":      {".dockerignore", ".gitignore", "Dockerfile", "README.md", "manifest.json", "package.json", "src/main.ts", "src/plugin.ts", "test/plugin.test.ts", "tsconfig.json", "tsconfig.test.json"},
	}
	for _, lang := range []Lang{Go, TypeScript} {
		for _, kind := range []Kind{Connector, View} {
			key := string(lang) + "/" + string(kind)
			o := Options{Name: "acme-" + string(kind), Lang: lang, Kind: kind}
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			files, err := Files(o)
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			if got := paths(files); !slices.Equal(got, want[key]) {
				t.Errorf("%s: files %v, want %v", key, got, want[key])
			}
			again, _ := Files(o)
			for i := range files {
				if !bytes.Equal(files[i].Data, again[i].Data) {
					t.Errorf("%s: %s differs between two runs", key, files[i].Path)
				}
			}
			byPath := map[string][]byte{}
			for _, f := range files {
				byPath[f.Path] = f.Data
				code := strings.HasSuffix(f.Path, ".go") || strings.HasSuffix(f.Path, ".ts")
				if !code && bytes.Contains(f.Data, []byte("{{")) || bytes.Contains(f.Data, []byte("<no value>")) {
					t.Errorf("%s: %s holds an unrendered template", key, f.Path)
				}
			}
			label, err := plugins.ManifestLabelValue(byPath["manifest.json"])
			if err != nil {
				t.Fatalf("%s: manifest.json: %v", key, err)
			}
			m, _ := plugins.ParseManifestLabel(label)
			if !slices.Equal(m.Capabilities, []plugins.Capability{plugins.Capability(kind)}) {
				t.Errorf("%s: capabilities %v", key, m.Capabilities)
			}
			df := string(byPath["Dockerfile"])
			for _, line := range []string{"USER 65532:65532", "ARG OPENFIEF_MANIFEST", `LABEL ` + plugins.ManifestLabel + `="${OPENFIEF_MANIFEST}"`} {
				if !strings.Contains(df, "\n"+line+"\n") {
					t.Errorf("%s: the Dockerfile has no line %s", key, line)
				}
			}
			if n := strings.Count(string(byPath["README.md"]), "\n"); n > 12 {
				t.Errorf("%s: README.md has %d lines", key, n)
			}
		}
	}
}

// TestGoMod: a development build requires the placeholder version and
// names the replace to add; a release's CLI requires its own version; --sdk
// writes the replace.
func TestGoMod(t *testing.T) {
	gomod := func(o Options) string {
		t.Helper()
		if err := o.Validate(); err != nil {
			t.Fatal(err)
		}
		files, err := Files(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if f.Path == "go.mod" {
				return string(f.Data)
			}
		}
		t.Fatal("no go.mod")
		return ""
	}
	dev := gomod(Options{Name: "acme", Lang: Go, Kind: Connector})
	if !strings.Contains(dev, "require "+GoSDKModule+" "+DevGoSDKVersion+"\n") || strings.Contains(dev, "replace") {
		t.Errorf("a development build's go.mod:\n%s", dev)
	}
	rel := gomod(Options{Name: "acme", Lang: Go, Kind: Connector, Version: "v1.2.3"})
	if !strings.Contains(rel, "require "+GoSDKModule+" v1.2.3\n") {
		t.Errorf("a release's go.mod:\n%s", rel)
	}
	sdk, _ := filepath.Abs(filepath.Join(root, "sdk", "go"))
	local := gomod(Options{Name: "acme", Lang: Go, Kind: Connector, SDK: filepath.Join(root, "sdk", "go")})
	if !strings.Contains(local, "replace "+GoSDKModule+" => "+goModPath(sdk)+"\n") {
		t.Errorf("--sdk's go.mod:\n%s", local)
	}
	// The go directive is the SDK's: a project cannot ask for less.
	sdkMod, err := os.ReadFile(filepath.Join(root, "sdk", "go", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go .*$`)
	if a, b := goLine.FindString(dev), goLine.FindString(string(sdkMod)); a != b {
		t.Errorf("go.mod says %q, sdk/go/go.mod %q", a, b)
	}
}

// TestPackageJSONMatchesSDK: the TypeScript projects ask for the SDK's own
// version and the runtimes and compiler the SDK is built and tested with.
func TestPackageJSONMatchesSDK(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "sdk", "ts", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sdk struct {
		Name            string            `json:"name"`
		Version         string            `json:"version"`
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(raw, &sdk); err != nil {
		t.Fatal(err)
	}
	if sdk.Name != TSSDKPackage || sdk.Version != TSSDKVersion {
		t.Errorf("sdk/ts is %s %s; TSSDKPackage %s, TSSDKVersion %s", sdk.Name, sdk.Version, TSSDKPackage, TSSDKVersion)
	}
	files, err := Files(Options{Name: "acme", Lang: TypeScript, Kind: Connector})
	if err != nil {
		t.Fatal(err)
	}
	var project struct {
		Dependencies, DevDependencies map[string]string
	}
	for _, f := range files {
		if f.Path == "package.json" {
			if err := json.Unmarshal(f.Data, &project); err != nil {
				t.Fatalf("package.json: %v", err)
			}
		}
	}
	for name, version := range project.Dependencies {
		if name == TSSDKPackage {
			if version != TSSDKVersion {
				t.Errorf("%s %s, want %s", name, version, TSSDKVersion)
			}
			continue
		}
		if sdk.DevDependencies[name] != version {
			t.Errorf("%s %s, sdk/ts builds with %s", name, version, sdk.DevDependencies[name])
		}
	}
	for name, version := range project.DevDependencies {
		if sdk.DevDependencies[name] != version {
			t.Errorf("%s %s, sdk/ts builds with %s", name, version, sdk.DevDependencies[name])
		}
	}
}

func TestValidateRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		o      Options
		option string
		rule   string
	}{
		"upper-case name":  {Options{Name: "Acme", Lang: Go, Kind: Connector}, "NAME", "lower-case DNS label"},
		"empty name":       {Options{Lang: Go, Kind: Connector}, "NAME", "required"},
		"long name":        {Options{Name: strings.Repeat("a", 57), Lang: Go, Kind: Connector}, "NAME", "at most 56"},
		"digit first":      {Options{Name: "1acme", Lang: Go, Kind: Connector}, "NAME", "starting with a letter"},
		"unknown language": {Options{Name: "acme", Lang: "rust", Kind: Connector}, "--lang", "go or ts"},
		"no language":      {Options{Name: "acme", Kind: Connector}, "--lang", "required: go or ts"},
		"unknown kind":     {Options{Name: "acme", Lang: Go, Kind: "exporter"}, "--kind", "connector or view"},
		"not the Go SDK":   {Options{Name: "acme", Lang: Go, Kind: Connector, SDK: root}, "--sdk", "sdk/go"},
		"not the TS SDK":   {Options{Name: "acme", Lang: TypeScript, Kind: Connector, SDK: filepath.Join(root, "sdk", "go")}, "--sdk", "sdk/ts"},
	} {
		err := tc.o.Validate()
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Option != tc.option || !strings.Contains(err.Error(), tc.rule) {
			t.Errorf("%s: %v, want an error of %s saying %q", name, err, tc.option, tc.rule)
		}
	}
	if err := (&Options{Name: "acme", Lang: Go, Kind: Connector, Version: "main"}).Validate(); err == nil {
		t.Error("a release version that is not vX.Y.Z was accepted")
	}
}

func TestWrite(t *testing.T) {
	o := Options{Name: "acme", Lang: Go, Kind: View}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "new", "acme")
	written, err := Write(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := Files(o)
	if !slices.Equal(written, paths(files)) {
		t.Errorf("wrote %v", written)
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(dir, f.Path))
		if err != nil || !bytes.Equal(got, f.Data) {
			t.Errorf("%s: %v", f.Path, err)
		}
	}
	// Into an empty folder too, but never into one that holds anything.
	empty := t.TempDir()
	if _, err := Write(empty, o); err != nil {
		t.Errorf("an empty folder: %v", err)
	}
	_, err = Write(dir, o)
	var oe *OptionError
	if !errors.Is(err, ErrNotEmpty) || !errors.As(err, &oe) || oe.Option != "--dir" {
		t.Errorf("a folder with files: %v, want ErrNotEmpty of --dir", err)
	}
}

// TestNameRuleIsTheCRDs: NAME is refused exactly when the Plugin CRD's
// validation would refuse it as a Plugin's metadata.name.
func TestNameRuleIsTheCRDs(t *testing.T) {
	crd, err := os.ReadFile(filepath.Join(root, "deploy", "crds", "openfief.io_plugins.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`self\.metadata\.name\.matches\('([^']+)'\)`).FindSubmatch(crd)
	size := regexp.MustCompile(`size\(self\.metadata\.name\) <= ([0-9]+)`).FindSubmatch(crd)
	if m == nil || size == nil {
		t.Fatal("the CRD's name rule was not found")
	}
	pattern := regexp.MustCompile(string(m[1]))
	maxLen, err := strconv.Atoi(string(size[1]))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "acme", "acme-rates", "a1", "a-1-b", "", "1a", "-a", "a-", "Acme", "a_b", "a.b", "ä", strings.Repeat("a", 56), strings.Repeat("a", 57)} {
		crdAccepts := pattern.MatchString(name) && len(name) <= maxLen
		err := (&Options{Name: name, Lang: Go, Kind: Connector}).Validate()
		if (err == nil) != crdAccepts {
			t.Errorf("%q: the CRD accepts it: %v; Validate: %v", name, crdAccepts, err)
		}
	}
}
