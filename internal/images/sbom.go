package images

import (
	"archive/tar"
	"bytes"
	"cmp"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
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
// and, from its go.sum hash, SHA-256; the Go standard library as
// pkg:golang/std@<go version>; the build settings of each platform's binary
// as properties. The binaries are read back out of the images, so the SBOM
// describes what was pushed. It is deterministic: the timestamp is the
// source's SOURCE_DATE_EPOCH, there is no serial number, and components and
// properties are sorted.
func SBOM(src Source, b Built) ([]byte, error) {
	if len(b.Images) == 0 {
		return nil, fmt.Errorf("sbom %s: no images", b.Spec.Name)
	}
	libs := map[string]cdx.Component{}
	var props []cdx.Property
	var main *debug.Module
	goVersion := ""
	for _, pi := range b.Images {
		bin, err := binaryOf(pi.Image, b.Spec.Name)
		if err != nil {
			return nil, fmt.Errorf("sbom %s %s: %w", b.Spec.Name, pi.Platform, err)
		}
		info, err := buildinfo.Read(bytes.NewReader(bin))
		if err != nil {
			return nil, fmt.Errorf("sbom %s %s: read build information: %w", b.Spec.Name, pi.Platform, err)
		}
		switch {
		case goVersion == "":
			goVersion, main = info.GoVersion, &info.Main
		case goVersion != info.GoVersion || main.Path != info.Main.Path:
			return nil, fmt.Errorf("sbom %s: the images' binaries were built by different toolchains or modules", b.Spec.Name)
		}
		for _, dep := range info.Deps {
			c := moduleComponent(dep)
			libs[c.BOMRef] = c
		}
		for _, s := range info.Settings {
			props = append(props, cdx.Property{Name: "go:build:" + pi.Platform.String() + ":" + s.Key, Value: s.Value})
		}
		props = append(props, cdx.Property{Name: "go:package:" + pi.Platform.String(), Value: info.Path})
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
			Description: b.Spec.Description, PackageURL: mainRef, BOMRef: mainRef,
			Properties: &props,
		},
	}
	bom.Components = &components
	bom.Dependencies = &[]cdx.Dependency{{Ref: mainRef, Dependencies: &refs}}
	var out bytes.Buffer
	enc := cdx.NewBOMEncoder(&out, cdx.BOMFileFormatJSON)
	enc.SetPretty(false).SetEscapeHTML(false)
	if err := enc.EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return nil, fmt.Errorf("sbom %s: %w", b.Spec.Name, err)
	}
	return bytes.TrimSpace(out.Bytes()), nil
}

// moduleComponent is a module a binary links, after its replacement.
func moduleComponent(m *debug.Module) cdx.Component {
	if m.Replace != nil {
		m = m.Replace
	}
	ref := purl(m.Path, m.Version)
	c := cdx.Component{Type: cdx.ComponentTypeLibrary, Name: m.Path, Version: m.Version, PackageURL: ref, BOMRef: ref}
	if sum, ok := strings.CutPrefix(m.Sum, "h1:"); ok {
		if raw, err := base64.StdEncoding.DecodeString(sum); err == nil && len(raw) == 32 {
			// go.sum's h1 is a SHA-256 of the module's file list.
			c.Hashes = &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: hex.EncodeToString(raw)}}
		}
		c.Properties = &[]cdx.Property{{Name: "go:sum", Value: m.Sum}}
	}
	return c
}

// purl is a Go module's package URL.
func purl(path, version string) string {
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
