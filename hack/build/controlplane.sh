#!/usr/bin/env bash
# controlplane.sh builds the control-plane binaries the tests and the
# local cluster run (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok) plus controller-gen and kubectl, all from the modules
# pinned under hack/tools, and links them into .bin/.
#
# Binaries live in a per-user cache keyed by a hash of the pins (every go.mod,
# go.sum and Go file of the modules hack/tools, hack/tools/etcd and
# hack/tools/kwok, the build flags, the Go version and the platform), so a
# fresh clone on the same machine builds nothing, and a changed pin builds
# into a new directory. Each binary is built only when missing, to a temporary name
# that is renamed into place, so an interrupted build never leaves half a
# binary behind.
#
# Usage: hack/build/controlplane.sh [NAME...]
#   NAME  build and link only these targets (e.g. controller-gen, for make
#         generate); none: all of them. The cache folder is the same either way,
#         so a later full build reuses what a partial one built.
#
# Environment:
#   OPENFIEF_CONTROLPLANE_CACHE  cache root (default
#                                ${XDG_CACHE_HOME:-$HOME/.cache}/openfief/controlplane)
#   OPENFIEF_BIN_DIR             where the links go (default <repo>/.bin)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tools="${root}/hack/tools"
bin_dir="${OPENFIEF_BIN_DIR:-${root}/.bin}"
cache_root="${OPENFIEF_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/openfief/controlplane}"

# shellcheck source=hack/lib/buildcache.sh
source "${root}/hack/lib/buildcache.sh"

pins_hash() {
	{
		go version
		go env GOOS GOARCH CGO_ENABLED GOFLAGS
		# Only the modules built here: hack/tools holds other modules too.
		(cd "${root}" && find hack/tools/go.mod hack/tools/go.sum hack/tools/*.go hack/tools/cmd hack/tools/etcd hack/tools/kwok \
			-type f \( -name go.mod -o -name go.sum -o -name '*.go' \) | LC_ALL=C sort |
			while read -r f; do
				printf '%s\n' "${f}"
				sha256sum <"${f}"
			done)
		# The build recipe (names, packages, flags) is part of the pin too.
		printf '%s\n' "${targets[@]}"
	} | sha256sum | cut -c1-16
}

# kube_version prints the k8s.io/kubernetes version pinned in hack/tools/go.mod.
kube_version() {
	awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "${tools}/go.mod"
}

kv="$(kube_version)"
if [[ ! ${kv} =~ ^v([0-9]+)\.([0-9]+)\. ]]; then
	echo "build/controlplane: cannot read the k8s.io/kubernetes version from ${tools}/go.mod" >&2
	exit 1
fi
kube_ldflags="$(kube_version_ldflags "${kv}")"

# name|module dir (relative to hack/tools)|package|ldflags
targets=(
	"etcd|etcd|.|-s -w"
	"kube-apiserver|.|./cmd/kube-apiserver|${kube_ldflags}"
	"kube-controller-manager|.|./cmd/kube-controller-manager|${kube_ldflags}"
	"kube-scheduler|.|./cmd/kube-scheduler|${kube_ldflags}"
	"kwok|kwok|sigs.k8s.io/kwok/cmd/kwok|-s -w"
	"controller-gen|.|sigs.k8s.io/controller-tools/cmd/controller-gen|-s -w"
)

hash="$(pins_hash)"
cache="${cache_root}/${hash}"
mkdir -p "${cache}" "${bin_dir}"
main_cache="${cache}"

# Only the named targets, when names are given (the hash above covers them all).
if (($# > 0)); then
	wanted=()
	for name in "$@"; do
		found=""
		for t in "${targets[@]}"; do
			[[ ${t%%|*} == "${name}" ]] && found="${t}"
		done
		[[ -n ${found} ]] || { echo "build/controlplane: no target named ${name}" >&2; exit 2; }
		wanted+=("${found}")
	done
	targets=("${wanted[@]}")
fi

build_targets

if (($# > 0)); then
	echo "$* up to date in ${cache} (built ${built}, linked into ${bin_dir})"
	exit 0
fi

# The kwok stages come from the pinned kwok module, next to the kwok binary.
stages="${cache}/kwok-stages.yaml"
if [[ ! -s ${stages} ]]; then
	tmp="${stages}.tmp.$$"
	tmp_files+=("${tmp}")
	(cd "${tools}/kwok" && go run ./cmd/kwok-stages >"${tmp}")
	mv -f "${tmp}" "${stages}"
fi
ln -sfn "${stages}" "${bin_dir}/kwok-stages.yaml"

# kubectl from the same Kubernetes release, pinned in a module of its own
# (hack/tools/kubectl) and cached under a key of its own beside the control
# plane's, so that it changes nothing of the control plane's cache.
targets=("kubectl|kubectl|k8s.io/kubernetes/cmd/kubectl|${kube_ldflags}")
cache="${cache_root}/kubectl-$(module_hash "${targets[*]}" hack/tools/kubectl)"
mkdir -p "${cache}"
build_targets

if ((built == 0)); then
	echo "control plane up to date in ${main_cache} (linked into ${bin_dir})"
else
	echo "control plane built into ${main_cache} (linked into ${bin_dir})"
fi
