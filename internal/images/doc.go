// Package images builds OpenFief's own container images from source, without
// Docker and without downloading a base image (OF-7): the operator, the
// egress proxy, openfief-core, the first-party plugins nbp-fx, ibkr-flex and
// webdav-csv, and the check probe (OF-29).
//
// Each image is a static Go binary (CGO_ENABLED=0, -trimpath, no VCS stamp)
// on a base this package assembles itself: /etc/passwd and /etc/group naming
// the non-root user 65532, and for the binaries that make TLS calls a CA
// bundle from the pinned module golang.org/x/crypto/x509roots/fallback, so
// the bundle does not depend on the machine that builds. Nothing else: no
// shell, no package manager. Images run as 65532:65532, carry the OCI
// annotations source, revision, version, licenses and created, and the
// plugins carry their manifest label (D-42) from plugins/<name>/manifest.json.
// Every image is built for linux/amd64 and linux/arm64 under one OCI image
// index.
//
// Builds are reproducible: layer entries are sorted, owned by 0:0 with fixed
// modes and a modification time of SOURCE_DATE_EPOCH (by default the commit
// time of HEAD), and every created timestamp is that time too, so building
// the same commit twice, with the same Go toolchain, gives the same digests.
//
// Everything is go-containerregistry (mutate, empty, tarball, layout,
// remote); this package only decides what goes into the layers and the
// config. See docs/images.md for the commands (make images, make sign) and
// hack/build/images for the main; releases are internal/release's.
package images
