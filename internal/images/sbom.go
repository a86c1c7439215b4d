package images

import (
	"archive/tar"
	"bytes"
	"cmp"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// maxBinaryBytes bounds a binary read back out of an image layer.
const maxBinaryBytes = 512 << 20

// SBOM is the CycloneDX 1.6 JSON SBOM of b's image index, made from the Go
// build information of the binary in each of its images (go version -m):
// the main module as the BOM's component, every module linked into a binary
// as a library component with its package URL (pkg:golang/<path>@<version>)
// and its go.sum hash as the property go:sum (not as a hash: an h1: hash is
// of the module's file list, not of any artifact a reader could check it
// against); a module used from a local directory (the SDK, a workspace
// module or a replace by directory) without a version (localModule); the Go
// standard library as pkg:golang/std@<go version>; the build settings of each
// platform's binary as properties. The binaries are read back out of the
// images, so the SBOM describes what was pushed. It is deterministic: the
// timestamp is the source's SOURCE_DATE_EPOCH, there is no serial number, and
// components and properties are sorted.
func SBOM(src Source, b Built) ([]byte, error) {
	if len(b.Images) == 0 {
		return nil, fmt.Errorf("sbom %s: no images", b.Spec.Name)
	}
	infos := make([]platformInfo, 0, len(b.Images))
	for _, pi := range b.Images {
		bin, err := binaryOf(pi.Image, b.Spec.Name)
		if err != nil {
			return nil, fmt.Errorf("sbom %s %s: %w", b.Spec.Name, pi.Platform, err)
		}
		info, err := buildinfo.Read(bytes.NewReader(bin))
		if err != nil {
			return nil, fmt.Errorf("sbom %s %s: read build information: %w", b.Spec.Name, pi.Platform, err)
		}
		infos = append(infos, platformInfo{Platform: pi.Platform.String(), Info: info})
	}
	return bomOf(src, b.Spec.Name, b.Spec.Description, infos)
}

// platformInfo is the build information of one platform's binary.
type platformInfo struct {
	Platform string
	Info     *debug.BuildInfo
}

// bomOf is SBOM's document, made from the build information of each
// platform's binary of the image name.
func bomOf(src Source, name, description string, infos []platformInfo) ([]byte, error) {
	libs := map[string]cdx.Component{}
	var props []cdx.Property
	var main *debug.Module
	goVersion := ""
	for _, pi := range infos {
		info := pi.Info
		switch {
		case goVersion == "":
			goVersion, main = info.GoVersion, &info.Main
		case goVersion != info.GoVersion || main.Path != info.Main.Path:
			return nil, fmt.Errorf("sbom %s: the images' binaries were built by different toolchains or modules", name)
		}
		for _, dep := range info.Deps {
			c := moduleComponent(dep)
			libs[c.BOMRef] = c
		}
		for _, s := range info.Settings {
			props = append(props, cdx.Property{Name: "go:build:" + pi.Platform + ":" + s.Key, Value: s.Value})
		}
		props = append(props, cdx.Property{Name: "go:package:" + pi.Platform, Value: info.Path})
	}
	if main == nil {
		return nil, fmt.Errorf("sbom %s: no images", name)
	}
	std := cdx.Component{
		Type: cdx.ComponentTypeLibrary, Name: "std", Version: goVersion,
		PackageURL: purl("std", goVersion), BOMRef: purl("std", goVersion),
	}
	libs[std.BOMRef] = std
	refs := slices.Sorted(maps.Keys(libs))
	components := make([]cdx.Component, 0, len(refs))
	for _, r := range refs {
		components = append(components, libs[r])
	}
	slices.SortFunc(props, func(a, b cdx.Property) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Value, b.Value)) })
	props = append([]cdx.Property{{Name: "go:version", Value: goVersion}}, props...)

	// Built without VCS stamping, the main module's version is (devel):
	// the image's version names it instead.
	mainRef := purl(main.Path, src.Version)
	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{
		Timestamp: src.Epoch.UTC().Format(time.RFC3339),
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{
			Type: cdx.ComponentTypeApplication, Name: "openfief images", Version: src.Version,
			Description: "internal/images: the SBOM of the Go build information of each image's binary",
		}}},
		Component: &cdx.Component{
			Type: cdx.ComponentTypeApplication, Name: main.Path, Version: src.Version,
			Description: description, PackageURL: mainRef, BOMRef: mainRef,
			Properties: &props,
		},
	}
	bom.Components = &components
	bom.Dependencies = &[]cdx.Dependency{{Ref: mainRef, Dependencies: &refs}}
	var out bytes.Buffer
	enc := cdx.NewBOMEncoder(&out, cdx.BOMFileFormatJSON)
	enc.SetPretty(false).SetEscapeHTML(false)
	if err := enc.EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return nil, fmt.Errorf("sbom %s: %w", name, err)
	}
	return bytes.TrimSpace(out.Bytes()), nil
}

// PropertyModuleSource is the property of a module component used from a
// local directory, whose value is LocalModuleSource.
const (
	PropertyModuleSource = "go:module:source"
	LocalModuleSource    = "local"
)

// moduleComponent is a module a binary links, after its replacement. go.sum's
// h1: hash is kept as the property go:sum: it is a SHA-256 over the
// module's list of file hashes, which no CycloneDX reader can compare with
// an artifact, so it is not given as the component's hash.
func moduleComponent(m *debug.Module) cdx.Component {
	if localModule(m) {
		ref := purl(m.Path, "")
		return cdx.Component{Type: cdx.ComponentTypeLibrary, Name: m.Path, PackageURL: ref, BOMRef: ref,
			Properties: &[]cdx.Property{{Name: PropertyModuleSource, Value: LocalModuleSource}}}
	}
	if m.Replace != nil {
		m = m.Replace
	}
	ref := purl(m.Path, m.Version)
	c := cdx.Component{Type: cdx.ComponentTypeLibrary, Name: m.Path, Version: m.Version, PackageURL: ref, BOMRef: ref}
	if strings.HasPrefix(m.Sum, "h1:") {
		c.Properties = &[]cdx.Property{{Name: "go:sum", Value: m.Sum}}
	}
	return c
}

// localModule reports whether m was built from a local directory rather
// than a published version: a workspace module, which the build information
// gives as (devel), or a module replaced by a directory, whose replacement
// has a path and no version. In this repository that is the Go SDK
// (sdk/go), built from the same commit as the main module. Its version is
// left out of its package URL: "(devel)" names no version, and the main
// module's version is not one of the SDK's.
func localModule(m *debug.Module) bool {
	if m.Replace != nil {
		return m.Replace.Version == ""
	}
	return m.Version == "" || m.Version == "(devel)"
}

// purl is a Go module's package URL; without a version when version is "".
func purl(path, version string) string {
	if version == "" {
		return "pkg:golang/" + path
	}
	return "pkg:golang/" + path + "@" + url.PathEscape(version)
}

// binaryOf reads /<name> from img's last layer, where newImage puts the
// binary.
func binaryOf(img v1.Image, name string) ([]byte, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	if len(layers) == 0 {
		return nil, errors.New("the image has no layers")
	}
	rc, err := layers[len(layers)-1].Uncompressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("the image has no /%s", name)
		}
		if err != nil {
			return nil, err
		}
		if strings.TrimPrefix(hdr.Name, "./") != name || hdr.Typeflag != tar.TypeReg {
			continue
		}
		if hdr.Size > maxBinaryBytes {
			return nil, fmt.Errorf("/%s is %d bytes, over the %d-byte cap", name, hdr.Size, maxBinaryBytes)
		}
		return io.ReadAll(io.LimitReader(tr, maxBinaryBytes))
	}
}
