#!/usr/bin/env bash
# make demo: the plugin lifecycle on a local platform, with the owner's CLI.
#
# Starts `openfief dev --local-plugins` (the full control plane built from
# source, the operator, the egress proxy, openfief-core and a loopback
# registry with two signed demo images; the demo plugin runs as a local
# process, since kwok runs no container, and reaches a loopback NBP
# stand-in), then walks one plugin through install, approval, the core's
# first syncs, an upgrade that asks for one more host, approval, revocation
# and uninstall, printing each command and the plugin table. Everything
# stops at the end (or on Ctrl-C).
#
# hack/demo.sh --in-cluster (make demo-in-cluster; root, make node) runs the
# same lifecycle with the whole platform as pods of a real node, installed by
# `openfief platform install` (`openfief dev --in-cluster`): the core's pod
# syncs the plugin's pod, which reaches the NBP stand-in through the egress
# proxy's pods.
set -euo pipefail

mode=(--local-plugins)
case "${1:-}" in
"") ;;
--in-cluster) mode=(--in-cluster) ;;
*)
	echo "usage: hack/demo.sh [--in-cluster]" >&2
	exit 2
	;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
bin="${root}/.bin/openfief"
start=$(date +%s)

echo "== building the openfief CLI"
go build -o "${bin}" ./cmd/openfief

state="$(mktemp -d "${TMPDIR:-/tmp}/openfief-demo.XXXXXX")"
"${bin}" dev "${mode[@]}" --state-dir "${state}" >"${state}/dev.log" 2>&1 &
dev=$!
cleanup() {
	kill -INT "${dev}" 2>/dev/null || true
	wait "${dev}" 2>/dev/null || true
	rm -rf "${state}"
}
trap cleanup EXIT

echo "== starting the platform (openfief dev; log in ${state}/dev.log)"
for _ in $(seq 1 1200); do
	[[ -f "${state}/ready" ]] && break
	if ! kill -0 "${dev}" 2>/dev/null; then
		cat "${state}/dev.log"
		echo "openfief dev exited before it was ready" >&2
		exit 1
	fi
	sleep 0.5
done
[[ -f "${state}/ready" ]] || { cat "${state}/dev.log"; echo "openfief dev was not ready within 600s" >&2; exit 1; }
sed -n '/^\[/p' "${state}/dev.log"
# shellcheck disable=SC1091
source "${state}/env"

n=0
step() {
	n=$((n + 1))
	printf '\n== %d. %s\n' "${n}" "$1"
}
run() {
	printf '$ openfief %s\n' "$*"
	"${bin}" "$@"
}

step "Check the demo image's signature and read its signed manifest"
run plugin verify "${OPENFIEF_DEMO_IMAGE_V1}" --signers "${OPENFIEF_SIGNERS}"

step "Install it: the vendor's request, nothing granted yet (NoGrant)"
run plugin install fx --image "${OPENFIEF_DEMO_IMAGE_V1}" --signers "${OPENFIEF_SIGNERS}"
run plugin wait fx --for NoGrant --timeout 60s
run plugin list

step "Approve what it asks for (Running)"
run plugin approve fx --yes
run plugin wait fx --for Running --timeout 120s
run plugin list

step "openfief-core calls nbp-fx's Sync on its schedule and stores the rates it delivers"
# The status is read into a variable, never piped into `grep -q`: grep -q
# exits at the first match, the CLI may still be writing, and under
# `set -o pipefail` its SIGPIPE made the check fail after a successful sync.
synced=""
for _ in $(seq 1 60); do
	status="$("${bin}" plugin status fx 2>/dev/null || true)"
	if grep -q 'Last sync: .*succeeded' <<<"${status}"; then
		synced=yes
		break
	fi
	sleep 1
done
run plugin status fx | sed -n '/^Core/,$p'
[[ -n "${synced}" ]] || { echo "the core did not sync fx within 60s" >&2; exit 1; }

step "Upgrade to a version that asks for one more host (the previous version keeps running)"
run plugin upgrade fx --image "${OPENFIEF_DEMO_IMAGE_V2}" --signers "${OPENFIEF_SIGNERS}"
run plugin wait fx --for RunningPreviousVersion --timeout 60s
run plugin list
run plugin status fx | sed -n '/^Pending/,/^Conditions/p' | sed '$d'

step "Approve the new host (the new version runs)"
run plugin approve fx --yes
run plugin wait fx --for Running --timeout 120s
run plugin list

step "Revoke the grant (nothing runs; a deny-all NetworkPolicy is all that is left)"
run plugin revoke fx --yes
run plugin wait fx --for NoGrant --timeout 60s
run plugin list
run plugin status fx | sed -n '/^Core/,$p'

step "Uninstall (the cluster's garbage collector removes the rest)"
run plugin uninstall fx --yes --wait 60s
run plugin list

printf '\n== demo finished in %ss\n' "$(($(date +%s) - start))"
cat <<'EOF'

== next, try the dashboard: every plugin's signature, signer and pending approval, live in your browser
  .bin/openfief dev                      # terminal 1: the platform, until Ctrl-C
  source .openfief-dev/env               # terminal 2, then:
  .bin/openfief plugin install fx --image "$OPENFIEF_DEMO_IMAGE_V1"
  .bin/openfief dashboard                # prints the URL with this run's token and opens your browser
EOF
