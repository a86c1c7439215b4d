#!/usr/bin/env bash
# node.sh builds the components of the local real node (docs/node.md):
# kubelet and kube-proxy from the k8s.io/kubernetes pinned in hack/tools/node
# (the same release as the control plane), containerd and its runc shim from
# hack/tools/containerd, kube-router (NetworkPolicy enforcement,
# firewall-only) from hack/tools/kube-router, and CoreDNS (the cluster DNS,
# with only the plugins it uses) from hack/tools/coredns; it links them into .bin/ and
# installs what comes from Debian (runc, the CNI plugins, iptables, ipset,
# conntrack, nftables, iproute2, util-linux for nsenter) through
# hack/lib/apt-install.sh. It also builds
# hack/build/pause, the project's own sandbox process, statically.
#
# Like hack/build/controlplane.sh: binaries live in a per-user cache keyed by
# a hash of the pins (go.mod, go.sum and Go files of those three modules, the
# build recipe, the Go version and the platform); each binary is built only
# when missing, to a temporary name renamed into place.
#
# Environment:
#   OPENFIEF_NODE_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/openfief/node)
#   OPENFIEF_BIN_DIR     where the links go (default <repo>/.bin)
#   OPENFIEF_NODE_APT=0  skip the Debian packages (build only; no root needed)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tools="${root}/hack/tools"
bin_dir="${OPENFIEF_BIN_DIR:-${root}/.bin}"
cache_root="${OPENFIEF_NODE_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/openfief/node}"

# shellcheck source=hack/lib/buildcache.sh
source "${root}/hack/lib/buildcache.sh"

# module_version prints the version of module $2 required in hack/tools/$1/go.mod.
module_version() {
	awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "${tools}/$1/go.mod"
}


kv="$(module_version node k8s.io/kubernetes)"
cv="$(module_version containerd github.com/containerd/containerd/v2)"
rv="$(module_version kube-router github.com/cloudnativelabs/kube-router/v2)"
if [[ ! ${kv} =~ ^v([0-9]+)\.([0-9]+)\. ]] || [[ -z ${cv} || -z ${rv} ]]; then
	echo "build/node: cannot read the pinned versions from hack/tools/{node,containerd,kube-router}/go.mod" >&2
	exit 1
fi
kube_ldflags="$(kube_version_ldflags "${kv}")"
ctr_ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=${cv}"
router_ldflags="-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=${rv}"

# name|module dir (relative to hack/tools)|package|ldflags
targets=(
	"kubelet|node|k8s.io/kubernetes/cmd/kubelet|${kube_ldflags}"
	"kube-proxy|node|k8s.io/kubernetes/cmd/kube-proxy|${kube_ldflags}"
	"containerd-shim-runc-v2|containerd|github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2|${ctr_ldflags}"
	"containerd|containerd|github.com/containerd/containerd/v2/cmd/containerd|${ctr_ldflags}"
	"kube-router|kube-router|github.com/cloudnativelabs/kube-router/v2/cmd/kube-router|${router_ldflags}"
)

pins_hash() {
	{
		go version
		go env GOOS GOARCH CGO_ENABLED GOFLAGS
		(cd "${root}" && find hack/tools/node hack/tools/containerd hack/tools/kube-router \
			-type f \( -name go.mod -o -name go.sum -o -name '*.go' \) | LC_ALL=C sort |
			while read -r f; do
				printf '%s\n' "${f}"
				sha256sum <"${f}"
			done)
		printf '%s\n' "${targets[@]}"
	} | sha256sum | cut -c1-16
}

if [[ ${OPENFIEF_NODE_APT:-1} != 0 ]]; then
	echo "node: Debian packages (runc, CNI plugins, iptables, ipset, conntrack, nftables, iproute2, util-linux)"
	"${root}/hack/lib/apt-install.sh" runc containernetworking-plugins iptables ipset conntrack nftables iproute2 util-linux
fi

hash="$(pins_hash)"
cache="${cache_root}/${hash}"
mkdir -p "${cache}" "${bin_dir}"
main_cache="${cache}"

build_targets

# Our own sandbox (pause) process, from the main module: static, no cgo,
# cached under a key of its own so that editing it rebuilds nothing else.
pause_hash="$(
	{
		go version
		go env GOOS GOARCH
		sha256sum "${root}/hack/build/pause/main.go" | cut -d' ' -f1
	} | sha256sum | cut -c1-16
)"
pause="${cache_root}/pause-${pause_hash}"
if [[ ! -x ${pause} ]]; then
	printf 'building pause... '
	tmp="${pause}.tmp.$$"
	tmp_files+=("${tmp}")
	(cd "${root}" && GOWORK= GOFLAGS="-buildvcs=false -trimpath" go build -ldflags "-s -w" -o "${tmp}" ./hack/build/pause)
	mv -f "${tmp}" "${pause}"
	echo "done"
	built=$((built + 1))
fi
ln -sfn "${pause}" "${bin_dir}/pause"

# CoreDNS, the cluster DNS (devcluster's Options.ClusterDNS), from
# hack/tools/coredns with only the plugins it links: static (it runs in an
# image with nothing else) and without paths of this machine, under a cache
# key of its own, so that it rebuilds none of the binaries above.
targets=("coredns|coredns|.|-s -w")
cache="${cache_root}/coredns-$(module_hash "${targets[*]}" hack/tools/coredns)"
mkdir -p "${cache}"
build_targets

if ((built == 0)); then
	echo "node up to date in ${main_cache} (linked into ${bin_dir})"
else
	echo "node built into ${main_cache} (linked into ${bin_dir})"
fi
