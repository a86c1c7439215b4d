#!/usr/bin/env bash
# apt-install.sh installs the Debian packages named on its command line that
# are not installed yet, so a fresh machine needs nothing installed by hand.
# The make targets call it before what needs the packages: make node (runc and
# the CNI plugins for the real node, through hack/build/node.sh), make
# test-deps (PostgreSQL for the core's store, Chromium for the dashboard's
# browser test, LibreOffice Calc for webdav-csv's spreadsheet test) and make
# actionlint (shellcheck); the tests themselves only look the tools up. It
# runs apt-get only when something is missing, updates the package lists at
# most once per run, and never starts a package's daemon (no systemd here;
# policy-rc.d blocks it too).
#
# It needs root to install; without root it names what is missing and fails,
# so the caller can say what cannot run and why.
set -euo pipefail

# installed reports whether Debian package $1 is installed. dpkg-query's
# answer is read whole before it is compared: piped into `grep -q` under
# pipefail, a writer that outlives grep fails the pipeline at random.
installed() {
	local status
	status="$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)"
	[[ "${status}" == "install ok installed" ]]
}

missing=()
for pkg in "$@"; do
	if ! installed "${pkg}"; then
		missing+=("${pkg}")
	fi
done
((${#missing[@]} == 0)) && exit 0

if ((EUID != 0)); then
	echo "apt-install: missing Debian packages: ${missing[*]} (run as root, or apt-get install them)" >&2
	exit 1
fi

# One installer at a time: tests of several packages may call this at once.
exec 9>/var/lock/openfief-apt-install.lock
flock 9
# Someone else may have installed them while we waited.
still=()
for pkg in "${missing[@]}"; do
	if ! installed "${pkg}"; then
		still+=("${pkg}")
	fi
done
((${#still[@]} == 0)) && exit 0

echo "apt-install: installing ${still[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${still[@]}" >&2
