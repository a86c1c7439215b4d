package catalog

import (
	"fmt"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// What else a release links into the binaries it builds besides the
// catalog: the version it was made as and the check probe's image, each set
// with -X like Symbol. The CLI a release builds carries both, so that
// `openfief check --isolation` runs exactly the probe that release built
// and signed, whatever the cluster's ConfigMaps say; a development build
// carries neither.
var (
	releasedVersion string
	releasedCommit  string
	releasedProbe   string
)

// VersionSymbol is the variable a release build sets with -X
// VersionSymbol=<version>.
const VersionSymbol = "github.com/arkadiuss/openfief/internal/trust/catalog.releasedVersion"

// CommitSymbol is the variable a release build sets with -X
// CommitSymbol=<commit>, the commit the release was built from: a
// release builds without Go's VCS stamping, for reproducible binaries.
const CommitSymbol = "github.com/arkadiuss/openfief/internal/trust/catalog.releasedCommit"

// ProbeSymbol is the variable a release build sets with -X
// ProbeSymbol=<repository>@sha256:<hex>, the check probe it built.
const ProbeSymbol = "github.com/arkadiuss/openfief/internal/trust/catalog.releasedProbe"

// Version is the release the binary was built by, "" for a development
// build.
func Version() string { return releasedVersion }

// Commit is the commit the binary's release was built from, "" for a
// development build (`openfief version` then reads Go's build information).
func Commit() string { return releasedCommit }

// CheckProbe is the check probe image the binary's release pins; ok is
// false in a development build. A linked-in value that is not an image
// pinned by digest is an error: the binary was built wrong.
func CheckProbe() (ref plugins.ImageRef, ok bool, err error) {
	if releasedProbe == "" {
		return plugins.ImageRef{}, false, nil
	}
	ref, err = plugins.ParseImageRef(releasedProbe)
	if err != nil {
		return plugins.ImageRef{}, false, fmt.Errorf("the check probe linked into this binary: %w", err)
	}
	return ref, true, nil
}
