#!/usr/bin/env bash
# vendor-tools.sh builds the stock tools a plugin vendor signs and pushes
# images with, pinned in tool modules of their own: cosign (hack/tools/cosign)
# and crane (hack/tools/crane). The guide for plugin authors names them, and
# the heavy tests run them to check that what they write is what the
# platform verifies.
#
#   hack/build/vendor-tools.sh     build both (make vendor-tools)
#
# Each is built once into the per-user tools cache and linked into .bin/
# (hack/lib/gotool.sh): a second run builds nothing. Environment:
# OPENFIEF_TOOLS_CACHE and OPENFIEF_BIN_DIR (hack/lib/gotool.sh).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=hack/lib/gotool.sh
source "${root}/hack/lib/gotool.sh"

build_go_tool "${root}/hack/tools/cosign" github.com/sigstore/cosign/v3/cmd/cosign cosign
build_go_tool "${root}/hack/tools/crane" github.com/google/go-containerregistry/cmd/crane crane
