// Package catalog embeds OpenFief's catalog file, plugins.json, which is
// released with the product and lists first-party and verified plugins
// (D-43, D-44). It holds no entries yet. There are no other catalogs: the
// operator trusts only this one.
package catalog

import (
	_ "embed"

	"github.com/arkadiuss/openfief/internal/plugins"
)

//go:embed plugins.json
var file []byte

// Load parses the embedded catalog with plugins.ParseCatalog. The operator
// calls it once at start and refuses to start if it fails (D-43).
func Load() (plugins.Catalog, error) {
	return plugins.ParseCatalog(file)
}

// File returns a copy of the embedded plugins.json, for tools that show it.
func File() []byte {
	return append([]byte(nil), file...)
}
