package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestPluginLabelFirstParty: for every first-party plugin, `plugin label`
// prints exactly the value hack/build/plugin-labels.sh wrote into its
// Dockerfile, which make images builds into the image, given the
// manifest.json or its folder.
func TestPluginLabelFirstParty(t *testing.T) {
	manifests, err := filepath.Glob(filepath.Join("..", "..", "plugins", "*", "manifest.json"))
	if err != nil || len(manifests) < 3 {
		t.Fatalf("first-party manifests: %v %v", manifests, err)
	}
	prefix := "LABEL " + plugins.ManifestLabel + "='"
	for _, m := range manifests {
		df, err := os.ReadFile(filepath.Join(filepath.Dir(m), "Dockerfile"))
		if err != nil {
			t.Fatal(err)
		}
		var want string
		for _, line := range strings.Split(string(df), "\n") {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				want = strings.TrimSuffix(v, "'")
			}
		}
		if want == "" {
			t.Fatalf("%s: no label line", m)
		}
		for _, arg := range []string{m, filepath.Dir(m)} {
			r := openfief(t, nil, runOpts{}, "plugin", "label", arg)
			expect(t, r, ExitOK)
			if r.out != want+"\n" {
				t.Errorf("plugin label %s:\n%s\nthe Dockerfile's label:\n%s", arg, r.out, want)
			}
		}
	}
}

// quoted is a manifest whose label holds a single quote, which each format
// must pass through a shell intact.
const quoted = `{
  "capabilities": ["connector"],
  "egress": ["api.example.com"],
  "configSchema": {"title": "acme's config", "type": "object"}
}`

// TestPluginLabelFormats runs each format's output through a real shell and
// then through the flag parser the tool uses (docker's takes the word as it
// is; crane's --label is a pflag map, ko's --image-label a pflag list), and
// checks that the label read back is the value, for a manifest with a
// single quote and one with an "=" too (which crane reads as CSV).
func TestPluginLabelFormats(t *testing.T) {
	eq := `{"capabilities":["connector"],"configSchema":{"title":"a=b, c's","type":"object"}}`
	for name, manifest := range map[string]string{"a quote": quoted, "an equals sign": eq} {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "manifest.json"), manifest)
		value, err := plugins.ManifestLabelValue([]byte(manifest))
		if err != nil {
			t.Fatal(err)
		}
		r := openfief(t, nil, runOpts{}, "plugin", "label", dir)
		expect(t, r, ExitOK)
		if r.out != value+"\n" {
			t.Fatalf("%s: value %s", name, r.out)
		}
		for _, format := range []string{"docker", "crane", "ko"} {
			r := openfief(t, nil, runOpts{}, "plugin", "label", dir, "--format", format)
			expect(t, r, ExitOK)
			out, err := exec.Command("sh", "-c", `eval "set -- $1"; printf '%s\n' "$@"`, "sh", strings.TrimSuffix(r.out, "\n")).Output()
			if err != nil {
				t.Fatalf("%s: sh: %v", format, err)
			}
			words := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			fs := pflag.NewFlagSet(format, pflag.ContinueOnError)
			docker := fs.StringArray("label-docker", nil, "")
			crane := fs.StringToString("label", nil, "")
			ko := fs.StringSlice("image-label", nil, "")
			if format == "docker" && len(words) == 2 && words[0] == "--label" {
				words = []string{"--label-docker=" + words[1]}
			}
			if err := fs.Parse(words); err != nil || fs.NArg() != 0 {
				t.Fatalf("%s %s: %q does not parse as one flag: %v", name, format, words, err)
			}
			var got string
			switch format {
			case "docker":
				if len(*docker) == 1 {
					got, _ = strings.CutPrefix((*docker)[0], plugins.ManifestLabel+"=")
				}
			case "crane":
				got = (*crane)[plugins.ManifestLabel]
			case "ko":
				if len(*ko) == 1 {
					got, _ = strings.CutPrefix((*ko)[0], plugins.ManifestLabel+"=")
				}
			}
			if got != value {
				t.Errorf("%s: --format %s reads back as %q, want %q", name, format, got, value)
			}
		}
	}
}

func TestPluginLabelRefuses(t *testing.T) {
	dir := t.TempDir()
	invalid := tempFile(t, "manifest.json", `{"capabilities":["connector"],"egress":["*.example.com"]}`)
	bidi := tempFile(t, "manifest.json", `{"capabilities":["connector"],"configSchema":{"title":"a`+"\u202e"+`b"}}`)
	for name, tc := range map[string]struct {
		args []string
		code int
		want []string
	}{
		"no manifest.json":    {[]string{dir}, ExitUsage, []string{"PATH: ", "manifest.json"}},
		"an invalid manifest": {[]string{invalid}, ExitInvalid, []string{"label.egress[0]"}},
		"a bidi control":      {[]string{bidi}, ExitInvalid, []string{"U+202E"}},
		"an unknown format":   {[]string{invalid, "--format", "buildah"}, ExitUsage, []string{"--format", "value, docker, crane or ko"}},
		"format with check":   {[]string{invalid, "--check", "x", "--format", "ko"}, ExitUsage, []string{"--format: not with --check"}},
		"two paths":           {[]string{dir, dir}, ExitUsage, []string{"at most one PATH"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := openfief(t, nil, runOpts{}, append([]string{"plugin", "label"}, tc.args...)...)
			expect(t, r, tc.code, tc.want...)
			if strings.Contains(r.out+r.errOut, "\u202e") {
				t.Errorf("the bidi control reached the output:\n%s", r)
			}
		})
	}
}

// TestPluginLabelCheck checks images in a real in-process registry against
// a manifest.json: matching ones by tag, by digest and as an index; each
// kind of difference named; registry failures with verify's exit codes.
func TestPluginLabelCheck(t *testing.T) {
	reg := cosigntest.NewRegistry(t, true)
	manifest := tempFile(t, "manifest.json", quoted)
	value := `{"capabilities":["connector"],"egress":["api.example.com"],"configSchema":{"title":"acme's config","type":"object"}}`
	label := func(v string) map[string]string { return map[string]string{plugins.ManifestLabel: v} }

	same := reg.PushImage(t, "acme/same", label(value))
	// The same manifest written otherwise: what the operator compares is equal.
	reworded := reg.PushImage(t, "acme/reworded", label(`{"egress":["API.example.com:443"],"configSchema":{"type":"object","title":"acme's config"},"capabilities":["connector"]}`))
	otherHost := reg.PushImage(t, "acme/other-host", label(`{"capabilities":["connector"],"egress":["api.example.org"],"configSchema":{"title":"acme's config","type":"object"}}`))
	none := reg.PushImage(t, "acme/none", map[string]string{"org.opencontainers.image.title": "acme"})
	invalid := reg.PushImage(t, "acme/invalid", label(`{"capabilities":["connector"],"egress":["*.example.com"]}`))
	empty := reg.PushImage(t, "acme/empty", label(""))
	index := reg.PushIndex(t, "acme/index", map[string]map[string]string{"linux/amd64": label(value), "linux/arm64": label(value)})
	halfIndex := reg.PushIndex(t, "acme/half", map[string]map[string]string{"linux/amd64": label(value), "linux/arm64": nil})

	for name, tc := range map[string]struct {
		image string
		code  int
		want  []string
	}{
		"the same label":       {same.String(), ExitOK, []string{"Image:     " + same.String(), "is " + manifest + "'s"}},
		"the same, reworded":   {reworded.String(), ExitOK, []string{"Image:     " + reworded.String(), "the same manifest, written otherwise"}},
		"an index":             {index.String(), ExitOK, []string{"Platforms: ", "linux/amd64", "linux/arm64"}},
		"another egress host":  {otherHost.String(), ExitFailure, []string{`differs from ` + manifest + ` in "egress"`, `the image has ["api.example.org"]`, `has ["api.example.com"]`}},
		"no label":             {none.String(), ExitFailure, []string{"no " + plugins.ManifestLabel + " label"}},
		"an invalid label":     {invalid.String(), ExitFailure, []string{"not a manifest the operator accepts", "label.egress[0]"}},
		"an empty label":       {empty.String(), ExitFailure, []string{"not a manifest the operator accepts"}},
		"one platform without": {halfIndex.String(), ExitFailure, []string{"(linux/arm64)", "no " + plugins.ManifestLabel + " label"}},
		"a missing image":      {reg.Host + "/acme/missing:0.1.0", ExitInvalidImage, []string{"--check: "}},
		"not loopback":         {strings.Replace(reg.Host, "127.0.0.1", "registry.invalid", 1) + "/acme/same:0.1.0", ExitRegistryUnavailable, []string{"--check: "}},
	} {
		t.Run(name, func(t *testing.T) {
			r := openfief(t, nil, runOpts{}, "plugin", "label", "--check", tc.image, manifest)
			expect(t, r, tc.code, tc.want...)
		})
	}
}
