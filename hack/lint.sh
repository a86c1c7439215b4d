#!/usr/bin/env bash
# lint.sh runs golangci-lint, pinned in the tool module hack/tools/lint, with
# the root .golangci.yml on both workspace modules (`.` and `sdk/go`), offline.
#
#   hack/lint.sh [golangci-lint run flags...]   lint both modules
#   hack/lint.sh tool                           only build the binary
#
# Examples: `hack/lint.sh --enable-only depguard` checks only the architecture
# rules; `hack/lint.sh --fix` applies the fixes linters offer.
#
# The binary is built from the module proxy's cache (the tool module's go.mod
# and go.sum pin every dependency) into a per-user cache keyed by a hash of
# those pins, the Go version and the platform, then linked to .bin/golangci-lint.
# A fresh clone on the same machine builds nothing; a changed pin builds into
# a new directory. The first build takes a few minutes on two cores.
#
# Environment:
#   OPENFIEF_TOOLS_CACHE  cache root (default
#                         ${XDG_CACHE_HOME:-$HOME/.cache}/openfief/tools)
#   OPENFIEF_BIN_DIR      where the link goes (default <repo>/.bin)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="${root}/hack/tools/lint"
bin_dir="${OPENFIEF_BIN_DIR:-${root}/.bin}"
cache_root="${OPENFIEF_TOOLS_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/openfief/tools}"
pkg=github.com/golangci/golangci-lint/v2/cmd/golangci-lint

# build_tool builds golangci-lint into the cache when missing and links it
# into .bin/. It never touches the tool module's go.sum.
build_tool() {
	local hash cache out tmp
	hash="$({
		go version
		go env GOOS GOARCH
		cat "${tools}/go.mod" "${tools}/go.sum"
	} | sha256sum | cut -c1-16)"
	cache="${cache_root}/golangci-lint-${hash}"
	out="${cache}/golangci-lint"
	mkdir -p "${cache}" "${bin_dir}"
	if [[ ! -x ${out} ]]; then
		echo "building golangci-lint from hack/tools/lint into ${cache} (first time: a few minutes)" >&2
		tmp="${out}.tmp.$$"
		trap 'rm -f "${tmp}"' EXIT
		(cd "${tools}" && GOWORK=off GOFLAGS="-mod=readonly" go build -o "${tmp}" "${pkg}")
		mv -f "${tmp}" "${out}"
		trap - EXIT
	fi
	ln -sfn "${out}" "${bin_dir}/golangci-lint"
}

build_tool
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
