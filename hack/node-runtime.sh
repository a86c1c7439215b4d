#!/usr/bin/env bash
# node-runtime.sh ARCH unpacks Debian's Node.js (trixie's `nodejs` and the
# packages it depends on, nothing recommended) for ARCH (amd64 or arm64) into
# a directory cached per user, and prints that directory. It holds:
#   rootfs/        the packages' files, as dpkg-deb -x unpacks them (no
#                  maintainer scripts run);
#   packages.tsv   one line per package: name, version, architecture and the
#                  SHA-256 of its .deb, sorted; the image's SBOM lists them.
#
# apt-get resolves and downloads the packages in a private root of its own
# (its own sources, lists and an empty dpkg status), so the machine's apt
# state is neither read nor changed. apt checks the archive's Release files
# against Debian's trixie keys (debian-archive-keyring) and every .deb
# against the SHA-256 the signed index gives: nothing unsigned is unpacked.
#
# The archive moves at point releases and security updates, and
# snapshot.debian.org is not reachable from where this project builds, so a
# runtime is resolved once and then reused until the cache is removed or
# NODE_RUNTIME_REFRESH=1 is set (docs/decisions.md: the TypeScript plugin
# image). Rebuilding an image from the same cache gives the same bytes.
set -euo pipefail

arch="${1:?usage: node-runtime.sh amd64|arm64}"
case "${arch}" in
amd64 | arm64) ;;
*)
	echo "node-runtime: architecture ${arch}: want amd64 or arm64" >&2
	exit 2
	;;
esac

suite=trixie
here="$(cd "$(dirname "$0")" && pwd)"
key="$(sha256sum "${here}/node-runtime.sh" | cut -c1-16)"
cache="${XDG_CACHE_HOME:-${HOME}/.cache}/openfief/node-runtime/${key}"
out="${cache}/${arch}"
mkdir -p "${cache}"

exec 9>"${cache}/.lock"
flock 9
if [[ -f "${out}/packages.tsv" && "${NODE_RUNTIME_REFRESH:-}" != 1 ]]; then
	echo "${out}"
	exit 0
fi

keys=/usr/share/keyrings
for k in debian-archive-trixie-automatic debian-archive-trixie-stable debian-archive-trixie-security-automatic; do
	if [[ ! -s "${keys}/${k}.gpg" ]]; then
		echo "node-runtime: ${keys}/${k}.gpg missing: install debian-archive-keyring (hack/apt-install.sh debian-archive-keyring)" >&2
		exit 1
	fi
done

work="$(mktemp -d "${cache}/work.XXXXXX")"
trap 'rm -rf "${work}"' EXIT
apt="${work}/apt"
mkdir -p "${apt}/etc/sources.list.d" "${apt}/etc/preferences.d" "${apt}/lists/partial" \
	"${apt}/archives/partial" "${apt}/dpkg"
: >"${apt}/dpkg/status"
cat >"${apt}/etc/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: http://deb.debian.org/debian
Suites: ${suite} ${suite}-updates
Components: main
Signed-By: ${keys}/debian-archive-trixie-automatic.gpg ${keys}/debian-archive-trixie-stable.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: ${suite}-security
Components: main
Signed-By: ${keys}/debian-archive-trixie-security-automatic.gpg
EOF
opts=(
	-o "Dir::Etc=${apt}/etc" -o Dir::Etc::sourcelist=/dev/null
	-o "Dir::Etc::sourceparts=${apt}/etc/sources.list.d"
	-o "Dir::Etc::preferencesparts=${apt}/etc/preferences.d"
	-o Dir::Etc::Trusted=/dev/null -o Dir::Etc::TrustedParts=/dev/null
	-o "Dir::State=${apt}" -o "Dir::State::Lists=${apt}/lists"
	-o "Dir::State::status=${apt}/dpkg/status"
	-o "Dir::Cache=${apt}" -o "Dir::Cache::archives=${apt}/archives"
	-o "APT::Architecture=${arch}" -o "APT::Architectures=${arch}"
	-o Acquire::Languages=none -o APT::Install-Recommends=false
	-o APT::Install-Suggests=false -o Debug::NoLocking=1
	-o APT::Sandbox::User=root
)
echo "node-runtime: resolving ${suite}'s nodejs for ${arch}" >&2
apt-get "${opts[@]}" -qq update >&2
apt-get "${opts[@]}" -qq -y --download-only install nodejs >&2

rootfs="${work}/rootfs"
mkdir -p "${rootfs}"
shopt -s nullglob
debs=("${apt}/archives/"*.deb)
if ((${#debs[@]} == 0)); then
	echo "node-runtime: apt downloaded no packages" >&2
	exit 1
fi
: >"${work}/packages.unsorted"
for deb in "${debs[@]}"; do
	dpkg-deb -x "${deb}" "${rootfs}"
	printf '%s\t%s\t%s\t%s\n' \
		"$(dpkg-deb -f "${deb}" Package)" "$(dpkg-deb -f "${deb}" Version)" \
		"$(dpkg-deb -f "${deb}" Architecture)" "$(sha256sum "${deb}" | cut -d' ' -f1)" >>"${work}/packages.unsorted"
done
LC_ALL=C sort "${work}/packages.unsorted" >"${work}/packages.tsv"

rm -rf "${out}"
mkdir -p "${out}"
mv "${rootfs}" "${out}/rootfs"
mv "${work}/packages.tsv" "${out}/packages.tsv"
echo "node-runtime: $(wc -l <"${out}/packages.tsv") packages for ${arch} in ${out}" >&2
echo "${out}"
