package images

import (
	"fmt"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// SPDX licence expressions of the images (D-5). The core binaries are the
// project's AGPL code; a first-party plugin links the core's connector or
// view adapter (AGPL) and the Apache-2.0 SDK. The check probe (OF-29) is a
// plugin image of the project's code only, without the SDK: LicenseCore.
const (
	LicenseCore   = "AGPL-3.0-only"
	LicensePlugin = "AGPL-3.0-only AND Apache-2.0"
)

// SourceURL is where the source of every image lives
// (org.opencontainers.image.source).
const SourceURL = "https://github.com/arkadiuss/openfief"

// Spec describes one image: which package becomes its binary and what the
// base under it holds.
type Spec struct {
	// Name is the image's name and its binary's, at /<Name>; it is the last
	// element of Package, as `go build -o dir/` names binaries.
	Name string
	// Package is the main package, relative to the module root.
	Package string
	// Description is the org.opencontainers.image.description annotation.
	Description string
	// Licenses is the org.opencontainers.image.licenses annotation.
	Licenses string
	// CABundle puts the CA bundle at /etc/ssl/certs/ca-certificates.crt, for
	// a binary that makes TLS calls to the internet.
	CABundle bool
	// ManifestFile, for a plugin, is its manifest.json relative to the
	// module root; its compacted JSON is the image's manifest label.
	ManifestFile string
}

// Specs lists the project's images in a fixed order.
func Specs() []Spec {
	return []Spec{
		{
			Name: "operator", Package: "./cmd/operator", Licenses: LicenseCore, CABundle: true,
			Description: "OpenFief operator: runs verified plugins with exactly what their grant allows",
		},
		{
			Name: "egress-proxy", Package: "./cmd/egress-proxy", Licenses: LicenseCore,
			Description: "OpenFief egress proxy: plugins' only way to the internet, by host name",
		},
		{
			Name: "openfief-core", Package: "./cmd/openfief-core", Licenses: LicenseCore, CABundle: true,
			Description: "OpenFief core (plugin host): calls connectors, stores what they deliver, verifies plugin tokens",
		},
		{
			Name: "nbp-fx", Package: "./plugins/nbp-fx", Licenses: LicensePlugin, CABundle: true,
			ManifestFile: "plugins/nbp-fx/manifest.json",
			Description:  "OpenFief plugin: Narodowy Bank Polski exchange rates",
		},
		{
			Name: "ibkr-flex", Package: "./plugins/ibkr-flex", Licenses: LicensePlugin, CABundle: true,
			ManifestFile: "plugins/ibkr-flex/manifest.json",
			Description:  "OpenFief plugin: Interactive Brokers Flex statements",
		},
		{
			Name: "webdav-csv", Package: "./plugins/webdav-csv", Licenses: LicensePlugin, CABundle: true,
			ManifestFile: "plugins/webdav-csv/manifest.json",
			Description:  "OpenFief plugin: the household's record as monthly CSV files in the owner's WebDAV folder",
		},
		{
			Name: "check-probe", Package: "./plugins/check-probe", Licenses: LicenseCore,
			ManifestFile: "plugins/check-probe/manifest.json",
			Description:  "OpenFief check probe: proves plugin isolation on the owner's cluster (openfief check --isolation)",
		},
	}
}

// SelectSpecs returns the specs with the given names, in Specs order; no
// names means all of them.
func SelectSpecs(names ...string) ([]Spec, error) {
	all := Specs()
	if len(names) == 0 {
		return all, nil
	}
	var out []Spec
	for _, s := range all {
		if slices.Contains(names, s.Name) {
			out = append(out, s)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(all, func(s Spec) bool { return s.Name == n }) {
			return nil, fmt.Errorf("no image %q (have operator, egress-proxy, openfief-core, nbp-fx, ibkr-flex, webdav-csv, check-probe)", n)
		}
	}
	return out, nil
}

// Platforms are the platforms `make images` builds, in index order.
func Platforms() []v1.Platform {
	return []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}
}

// ParsePlatform reads "linux/amd64" or "linux/arm64".
func ParsePlatform(s string) (v1.Platform, error) {
	for _, p := range Platforms() {
		if p.String() == s {
			return p, nil
		}
	}
	return v1.Platform{}, fmt.Errorf("platform %q: want linux/amd64 or linux/arm64", s)
}
