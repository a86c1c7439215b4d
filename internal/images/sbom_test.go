package images

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// TestBOMOfModules makes the SBOM of two platforms' build information as a
// plugin's binary has it: a published module with its go.sum hash, the SDK
// from the workspace ((devel)) or replaced by its directory, and a module
// replaced by another published one. The go.sum hash is a property, never a
// component hash, and the SDK's package URL has no version.
func TestBOMOfModules(t *testing.T) {
	const (
		sdk = "github.com/arkadiuss/openfief/sdk/go"
		h1  = "h1:GVXTDeOrNUs2v7fV8dBcK3W9Do4K/MJ2MmZnPFmJwyw="
	)
	published := &debug.Module{Path: "github.com/prometheus/client_golang", Version: "v1.23.2", Sum: h1}
	replaced := &debug.Module{Path: "example.com/old", Version: "v1.0.0", Sum: "h1:aaaa",
		Replace: &debug.Module{Path: "example.com/fork", Version: "v1.0.1", Sum: h1}}
	info := func(sdkModule *debug.Module) *debug.BuildInfo {
		return &debug.BuildInfo{
			GoVersion: "go1.26.8", Path: ModulePath + "/plugins/nbp-fx",
			Main:     debug.Module{Path: ModulePath, Version: "(devel)"},
			Deps:     []*debug.Module{published, replaced, sdkModule},
			Settings: []debug.BuildSetting{{Key: "CGO_ENABLED", Value: "0"}},
		}
	}
	for name, sdkModule := range map[string]*debug.Module{
		"workspace":            {Path: sdk, Version: "(devel)"},
		"replaced by a folder": {Path: sdk, Version: "v0.0.0", Replace: &debug.Module{Path: "./sdk/go"}},
	} {
		t.Run(name, func(t *testing.T) {
			src := Source{Version: "v1.2.0", Epoch: time.Unix(1796052499, 0)}
			raw, err := bomOf(src, "nbp-fx", "the NBP connector", []platformInfo{
				{Platform: "linux/amd64", Info: info(sdkModule)}, {Platform: "linux/arm64", Info: info(sdkModule)},
			})
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(raw, []byte("(devel)")) || bytes.Contains(raw, []byte("./sdk/go")) {
				t.Errorf("the SBOM names (devel) or the SDK's folder:\n%s", raw)
			}
			var bom cdx.BOM
			if err := cdx.NewBOMDecoder(bytes.NewReader(raw), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
				t.Fatal(err)
			}
			if got := bom.Metadata.Component.PackageURL; got != "pkg:golang/"+ModulePath+"@v1.2.0" {
				t.Errorf("main component %s", got)
			}
			byPURL := map[string]cdx.Component{}
			for _, c := range *bom.Components {
				byPURL[c.PackageURL] = c
				if c.Hashes != nil {
					t.Errorf("%s has hashes %+v: a go.sum h1: hash is no artifact's SHA-256", c.PackageURL, *c.Hashes)
				}
			}
			want := map[string]cdx.Property{
				"pkg:golang/github.com/prometheus/client_golang@v1.23.2": {Name: "go:sum", Value: h1},
				"pkg:golang/example.com/fork@v1.0.1":                     {Name: "go:sum", Value: h1},
				"pkg:golang/" + sdk:                                      {Name: PropertyModuleSource, Value: LocalModuleSource},
				"pkg:golang/std@go1.26.8":                                {},
			}
			if len(byPURL) != len(want) {
				t.Errorf("components %v, want %d", keysOf(byPURL), len(want))
			}
			for p, prop := range want {
				c, ok := byPURL[p]
				switch {
				case !ok:
					t.Errorf("no component %s", p)
				case prop == (cdx.Property{}) && c.Properties != nil:
					t.Errorf("%s: properties %+v", p, *c.Properties)
				case prop != (cdx.Property{}) && (c.Properties == nil || len(*c.Properties) != 1 || (*c.Properties)[0] != prop):
					t.Errorf("%s: properties %+v, want %+v", p, c.Properties, prop)
				}
			}
			if c := byPURL["pkg:golang/"+sdk]; c.Version != "" || c.Name != sdk {
				t.Errorf("the SDK: %+v, want its path and no version", c)
			}
			for _, d := range *(*bom.Dependencies)[0].Dependencies {
				if strings.Contains(d, "@(devel)") || strings.HasSuffix(d, "@") {
					t.Errorf("dependency %q", d)
				}
			}
		})
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
