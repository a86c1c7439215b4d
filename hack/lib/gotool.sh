# shellcheck shell=bash
# gotool.sh: build one Go tool pinned in a tool module into the per-user tools
# cache and link it into .bin/, sourced by hack/check/lint.sh (golangci-lint),
# hack/check/actionlint.sh (actionlint), hack/build/vendor-tools.sh (cosign,
# crane) and hack/build/promtool.sh (promtool).
#
# The binary is built from the module proxy's cache (the tool module's go.mod
# and go.sum pin every dependency) into a folder keyed by a hash of those pins,
# the Go version and the platform. A fresh clone on the same machine builds
# nothing; a changed pin builds into a new folder. The tool module's go.sum is
# never touched.
#
# Environment:
#   OPENFIEF_TOOLS_CACHE  cache root (default
#                         ${XDG_CACHE_HOME:-$HOME/.cache}/openfief/tools)
#   OPENFIEF_BIN_DIR      where the link goes (default <repo>/.bin)

# build_go_tool MODULE_DIR PACKAGE NAME builds PACKAGE from the tool module in
# MODULE_DIR as NAME, when the cache lacks it, and links .bin/NAME to it.
build_go_tool() {
	local tools=$1 pkg=$2 tool=$3
	local root bin_dir cache_root hash cache out tmp
	root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
	bin_dir="${OPENFIEF_BIN_DIR:-${root}/.bin}"
	cache_root="${OPENFIEF_TOOLS_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/openfief/tools}"
	hash="$({
		go version
		go env GOOS GOARCH
		cat "${tools}/go.mod" "${tools}/go.sum"
	} | sha256sum | cut -c1-16)"
	cache="${cache_root}/${tool}-${hash}"
	out="${cache}/${tool}"
	mkdir -p "${cache}" "${bin_dir}"
	if [[ ! -x ${out} ]]; then
		echo "building ${tool} from ${tools#"${root}"/} into ${cache} (first time: it may take minutes)" >&2
		tmp="${out}.tmp.$$"
		trap 'rm -f "${tmp}"' EXIT
		(cd "${tools}" && GOWORK=off GOFLAGS="-mod=readonly" go build -o "${tmp}" "${pkg}")
		mv -f "${tmp}" "${out}"
		trap - EXIT
	fi
	ln -sfn "${out}" "${bin_dir}/${tool}"
}
