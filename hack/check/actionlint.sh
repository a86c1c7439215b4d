#!/usr/bin/env bash
# actionlint.sh checks the GitHub Actions workflows (.github/workflows/*.yml)
# with actionlint, pinned in the tool module hack/tools/actionlint: syntax,
# expressions and their types, action inputs, permissions scopes, untrusted
# input interpolated into scripts, and (through shellcheck) every run: script.
#
#   hack/check/actionlint.sh [actionlint flags...]   check every workflow
#   hack/check/actionlint.sh tool                    only build the binary
#
# ShellCheck is required, not optional: without it actionlint silently skips
# the run: scripts, so the same tree would pass on one machine and fail on
# another. It is a Debian package; hack/lib/apt-install.sh installs it when
# missing (as root; otherwise it names the package and this fails).
#
# The binary is built once into the per-user tools cache and linked to
# .bin/actionlint (hack/lib/gotool.sh). Environment: OPENFIEF_TOOLS_CACHE and
# OPENFIEF_BIN_DIR (hack/lib/gotool.sh).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin_dir="${OPENFIEF_BIN_DIR:-${root}/.bin}"
# shellcheck source=hack/lib/gotool.sh
source "${root}/hack/lib/gotool.sh"

build_go_tool "${root}/hack/tools/actionlint" github.com/rhysd/actionlint/cmd/actionlint actionlint
if [[ ${1-} == tool ]]; then
	exit 0
fi

"${root}/hack/lib/apt-install.sh" shellcheck
shellcheck="$(command -v shellcheck)"

shopt -s nullglob
workflows=("${root}"/.github/workflows/*.yml "${root}"/.github/workflows/*.yaml)
if ((${#workflows[@]} == 0)); then
	echo "actionlint: no workflows in .github/workflows" >&2
	exit 1
fi
echo "== actionlint .github/workflows (shellcheck ${shellcheck})"
cd "${root}"
exec "${bin_dir}/actionlint" -shellcheck "${shellcheck}" -pyflakes= "$@" "${workflows[@]#"${root}"/}"
