// Package catalog holds OpenFief's catalog, plugins.json, which is released
// with the product and lists first-party and verified plugins (D-43, D-44).
// There are no other catalogs: the operator trusts only this one.
//
// A development build embeds the repository's plugins.json, which lists no
// plugin. A release build links its own catalog into the binary (OF-30):
// the release pins the digests of the plugins it has just built and signed,
// so their catalog cannot be a file committed before the build. It sets
// Symbol with the linker's -X to Encode(plugins.json), in the operator and
// in the openfief CLI alike, so the two say Verified of the same images; the
// CLI also gets the release's version and check probe (release.go).
package catalog

import (
	_ "embed"
	"encoding/base64"
	"fmt"

	"github.com/arkadiuss/openfief/internal/plugins"
)

//go:embed plugins.json
var embedded []byte

// released is a release's catalog, base64 of its plugins.json, set at link
// time; empty in a development build.
var released string

// Symbol is the variable a release build sets with -X Symbol=Encode(file).
const Symbol = "github.com/arkadiuss/openfief/internal/trust/catalog.released"

// Encode turns a catalog file into the value of Symbol: base64, so that it
// holds no space or quote the go command's -ldflags would split on.
func Encode(file []byte) string { return base64.StdEncoding.EncodeToString(file) }

// Load parses the binary's catalog with plugins.ParseCatalog. The operator
// calls it once at start and refuses to start if it fails (D-43), which
// includes a linked-in value that is not base64.
func Load() (plugins.Catalog, error) {
	file, err := current()
	if err != nil {
		return plugins.Catalog{}, err
	}
	return plugins.ParseCatalog(file)
}

// File returns a copy of the binary's plugins.json, for tools that show it.
func File() ([]byte, error) { return current() }

// Released says whether the binary carries a release's catalog rather than
// the repository's.
func Released() bool { return released != "" }

func current() ([]byte, error) {
	if released == "" {
		return append([]byte(nil), embedded...), nil
	}
	file, err := base64.StdEncoding.DecodeString(released)
	if err != nil {
		return nil, fmt.Errorf("the release's catalog linked into this binary is not base64: %w", err)
	}
	return file, nil
}
