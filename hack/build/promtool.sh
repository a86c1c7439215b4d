#!/usr/bin/env bash
# promtool.sh builds Prometheus' promtool, pinned in a tool module of its own
# (hack/tools/promtool), which the heavy tests of deploy/monitoring run:
# `promtool check rules` and `promtool test rules` on the alert rules, so the
# rules are checked by the engine that will evaluate them.
#
#   hack/build/promtool.sh     build it (make promtool)
#
# It is built once into the per-user tools cache and linked into .bin/
# (hack/lib/gotool.sh): a second run builds nothing. Environment:
# OPENFIEF_TOOLS_CACHE and OPENFIEF_BIN_DIR (hack/lib/gotool.sh).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=hack/lib/gotool.sh
source "${root}/hack/lib/gotool.sh"

build_go_tool "${root}/hack/tools/promtool" github.com/prometheus/prometheus/cmd/promtool promtool
