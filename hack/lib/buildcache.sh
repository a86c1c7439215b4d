# buildcache.sh: what hack/build/controlplane.sh and hack/build/node.sh share,
# sourced by both. Each script sets root, tools (hack/tools), bin_dir, cache
# (the per-pin cache folder) and targets before calling build_targets.

# The tools modules are not part of go.work: keep the workspace and any
# caller's module flags out of their builds, and never touch their go.sum.
# Every binary is built as the tree's own are (the Makefile's TREE_ENV):
# static, without cgo, and without this machine's paths. One configuration
# lets the test binaries, vet, lint and the other tools reuse the packages
# the control plane compiled (hack/tools/*/go.mod pin the libraries they
# share to the same versions); a second one would compile each of them
# again.
export GOWORK=off
export CGO_ENABLED=0
export GOFLAGS="-mod=readonly -buildvcs=false -trimpath"

# elapsed prints $1 seconds as 42s or 3m07s.
elapsed() {
	local s=$1
	if ((s >= 60)); then
		printf '%dm%02ds' $((s / 60)) $((s % 60))
	else
		printf '%ds' "${s}"
	fi
}

# kube_version_ldflags prints the ldflags that stamp Kubernetes version $1 (vX.Y.Z)
# into a Kubernetes binary, as its own release build does; it fails on a
# version it cannot read.
kube_version_ldflags() {
	[[ $1 =~ ^v([0-9]+)\.([0-9]+)\. ]] || return 1
	local flags="-s -w" pkg
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		flags+=" -X ${pkg}.gitVersion=$1 -X ${pkg}.gitMajor=${BASH_REMATCH[1]} -X ${pkg}.gitMinor=${BASH_REMATCH[2]} -X ${pkg}.gitTreeState=clean"
	done
	printf '%s' "${flags}"
}

# module_hash prints a 16-hex-digit key of the Go toolchain, the platform,
# every go.mod, go.sum and Go file under the folders $2... (relative to
# ${root}) and the build recipe $1: the cache key of a binary built from
# modules of its own.
module_hash() {
	local recipe=$1
	shift
	{
		go version
		go env GOOS GOARCH CGO_ENABLED GOFLAGS
		(cd "${root}" && find "$@" -type f \( -name go.mod -o -name go.sum -o -name '*.go' \) | LC_ALL=C sort |
			while read -r f; do
				printf '%s\n' "${f}"
				sha256sum <"${f}"
			done)
		printf '%s\n' "${recipe}"
	} | sha256sum | cut -c1-16
}

# Temporary outputs of this run, removed if it is interrupted.
tmp_files=()
remove_tmp_files() {
	if ((${#tmp_files[@]})); then
		rm -f "${tmp_files[@]}"
	fi
}
trap remove_tmp_files EXIT

# built counts the binaries this run built (0: everything was cached).
built=0

# build_targets builds every entry of targets (name|module dir relative to
# hack/tools|package|ldflags) that ${cache} lacks, to a temporary name
# renamed into place so an interrupted build leaves no half binary, and links
# each into ${bin_dir}.
build_targets() {
	local total=${#targets[@]} i=0 t name dir pkg ldflags out tmp start
	for t in "${targets[@]}"; do
		IFS='|' read -r name dir pkg ldflags <<<"${t}"
		i=$((i + 1))
		out="${cache}/${name}"
		if [[ ! -x ${out} ]]; then
			printf 'building %s (%d/%d)... ' "${name}" "${i}" "${total}"
			start=${SECONDS}
			tmp="${out}.tmp.$$"
			tmp_files+=("${tmp}")
			if ! (cd "${tools}/${dir}" && go build -ldflags "${ldflags}" -o "${tmp}" "${pkg}"); then
				echo "failed"
				exit 1
			fi
			mv -f "${tmp}" "${out}"
			printf 'done in %s\n' "$(elapsed $((SECONDS - start)))"
			built=$((built + 1))
		fi
		ln -sfn "${out}" "${bin_dir}/${name}"
	done
}
