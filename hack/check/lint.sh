#!/usr/bin/env bash
# lint.sh runs golangci-lint, pinned in the tool module hack/tools/lint, with
# the root .golangci.yml on both workspace modules (`.` and `sdk/go`), offline.
#
#   hack/check/lint.sh [golangci-lint run flags...]   lint both modules
#   hack/check/lint.sh tool                           only build the binary
#
# Examples: `hack/check/lint.sh --enable-only depguard` checks only the architecture
# rules; `hack/check/lint.sh --fix` applies the fixes linters offer.
#
# The binary is built once into the per-user tools cache and linked to
# .bin/golangci-lint (hack/lib/gotool.sh); the first build takes a few minutes
# on two cores.
#
# Environment: OPENFIEF_TOOLS_CACHE and OPENFIEF_BIN_DIR (hack/lib/gotool.sh).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tools="${root}/hack/tools/lint"
bin_dir="${OPENFIEF_BIN_DIR:-${root}/.bin}"
# shellcheck source=hack/lib/gotool.sh
source "${root}/hack/lib/gotool.sh"

build_go_tool "${tools}" github.com/golangci/golangci-lint/v2/cmd/golangci-lint golangci-lint
if [[ ${1-} == tool ]]; then
	exit 0
fi

# Offline and read-only: every module the workspace needs is already in the
# module cache (the build needs it too), and go.mod/go.sum are never changed.
# The caller's other build flags stay: make verify passes the images' settings
# so that the packages the linter has compiled are the ones vet and the tests
# use.
GOFLAGS="-mod=readonly${GOFLAGS:+ ${GOFLAGS}}"
export GOPROXY=off GOFLAGS

lint="${bin_dir}/golangci-lint"
status=0
for m in . sdk/go; do
	echo "== golangci-lint ${m}"
	(cd "${root}/${m}" && "${lint}" run --config "${root}/.golangci.yml" "$@" ./...) || status=1
done
exit "${status}"
