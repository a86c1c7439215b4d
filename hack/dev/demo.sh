#!/usr/bin/env bash
# make demo: the plugin lifecycle on a local platform, with the owner's CLI.
#
# Starts `openfief dev --local-plugins` (the full control plane built from
# source, the operator, the egress proxy, openfief-core and a loopback
# registry with signed demo images; the demo plugins run as local
# processes, since kwok runs no container, and reach loopback stand-ins for
# NBP and for the owner's WebDAV server), then walks the connector nbp-fx
# through install, approval and the core's first syncs; installs the view
# webdav-csv with its credentials as a Secret, approves only what it needs,
# and shows the CSV file the core's export of the stored rates wrote into
# the stand-in's folder; then takes nbp-fx through an upgrade that asks for
# one more host, approval, revocation and uninstall, and uninstalls the
# view, printing each command and the plugin table. Everything stops at the
# end (or on Ctrl-C).
#
# hack/dev/demo.sh --in-cluster (make demo-in-cluster; root, make node) runs
# nbp-fx's lifecycle with the whole platform as pods of a real node,
# installed by `openfief platform install` (`openfief dev --in-cluster`): the
# core's pod syncs the plugin's pod, which reaches the NBP stand-in through
# the egress proxy's pods, and the view's pod writes to the WebDAV stand-in
# through them.
set -euo pipefail

mode=(--local-plugins)
case "${1:-}" in
"") ;;
--in-cluster) mode=(--in-cluster) ;;
*)
	echo "usage: hack/dev/demo.sh [--in-cluster]" >&2
	exit 2
	;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
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

# The view's steps, after nbp-fx stored rates: webdav-csv with its
# credentials as a Secret and your server's host granted, and the CSV file
# the core's export wrote into the WebDAV stand-in's folder.
view_steps() {
	step "Check the view's image: webdav-csv asks for the view capability, one Secret, one host of your choosing and the accounts tier"
	run plugin verify "${OPENFIEF_DEMO_IMAGE_VIEW}" --signers "${OPENFIEF_SIGNERS}"

	step "Give it your WebDAV login as the Secret webdav-credentials (read from files, never shown)"
	# The stand-in's made-up credentials, which openfief dev wrote to 0600
	# files; an owner would use an app password of their Nextcloud or NAS.
	kubectl="${root}/.bin/kubectl"
	printf '$ kubectl -n openfief create secret generic webdav-credentials --from-file=username=%s --from-file=password=%s\n' \
		"${OPENFIEF_DEMO_DAV_CREDENTIALS}/username" "${OPENFIEF_DEMO_DAV_CREDENTIALS}/password"
	"${kubectl}" -n openfief create secret generic webdav-credentials \
		--from-file=username="${OPENFIEF_DEMO_DAV_CREDENTIALS}/username" \
		--from-file=password="${OPENFIEF_DEMO_DAV_CREDENTIALS}/password"

	step "Install the view, pointed at your WebDAV folder (a stand-in for ${OPENFIEF_DEMO_DAV_HOST})"
	view_config="${state}/records.json"
	printf '{"url": "%s"}\n' "${OPENFIEF_DEMO_DAV_URL}" >"${view_config}"
	printf '$ cat %s\n' "${view_config}"
	cat "${view_config}"
	run plugin install records --image "${OPENFIEF_DEMO_IMAGE_VIEW}" --config "${view_config}"
	run plugin wait records --for NoGrant --timeout 60s

	# Rates need no data tier, but a first install runs only once nothing it
	# asks for is pending (AwaitingApproval otherwise), so the accounts tier
	# is granted too; narrowing the grant later would keep it running with
	# the view alone (RunningPreviousVersion).
	step "Approve it, naming your server's host; a first install runs only with all it asks for, so accounts too (rates need no tier)"
	run plugin approve records --host "${OPENFIEF_DEMO_DAV_HOST}" --capability view --secret webdav-credentials --data-tier accounts --yes
	run plugin wait records --for Running --timeout 120s
	run plugin list

	step "openfief-core exports the rates nbp-fx stored to the view, which writes them as CSV into your folder"
	# The first export starts within seconds of the view running; the status
	# is read into a variable, as in the sync's step.
	fx_csv=""
	for _ in $(seq 1 90); do
		status="$("${bin}" plugin status records 2>/dev/null || true)"
		# sed, not head: it reads to the end, so nothing upstream dies of SIGPIPE.
		fx_csv="$(find "${OPENFIEF_DEMO_DAV_DIR}" -type f -name '*-fx-rates.csv' | sort | sed -n 1p)"
		if grep -q 'Last export: .*succeeded' <<<"${status}" && [[ -n "${fx_csv}" ]]; then
			break
		fi
		fx_csv=""
		sleep 1
	done
	run plugin status records | sed -n '/^Core/,$p'
	[[ -n "${fx_csv}" ]] || { echo "the view exported no FX rates within 90s" >&2; exit 1; }
	printf '$ find %s -type f\n' "${OPENFIEF_DEMO_DAV_DIR}"
	find "${OPENFIEF_DEMO_DAV_DIR}" -type f | sort
	printf '$ head -n 5 %s\n' "${fx_csv}"
	head -n 5 "${fx_csv}"
}

# verify reads no cluster: $OPENFIEF_SIGNERS is openfief dev's copy of the
# ConfigMap openfief-trusted-signers, which install, upgrade and the
# operator read.
step "Check the demo image's signature and read its signed manifest"
run plugin verify "${OPENFIEF_DEMO_IMAGE_V1}" --signers "${OPENFIEF_SIGNERS}"

step "Install it: the vendor's request, nothing granted yet (NoGrant)"
run plugin install fx --image "${OPENFIEF_DEMO_IMAGE_V1}"
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

view_steps

step "Upgrade nbp-fx to a version that asks for one more host (the previous version keeps running)"
run plugin upgrade fx --image "${OPENFIEF_DEMO_IMAGE_V2}"
run plugin wait fx --for RunningPreviousVersion --timeout 60s
run plugin list
run plugin status fx | sed -n '/^Pending/,/^Conditions/p' | sed '$d'

step "Approve nbp-fx's new host (the new version runs)"
run plugin approve fx --yes
run plugin wait fx --for Running --timeout 120s
run plugin list

step "Revoke nbp-fx's grant (nothing runs; a deny-all NetworkPolicy is all that is left)"
run plugin revoke fx --yes
run plugin wait fx --for NoGrant --timeout 60s
run plugin list
run plugin status fx | sed -n '/^Core/,$p'

step "Uninstall nbp-fx (the cluster's garbage collector removes the rest)"
run plugin uninstall fx --yes --wait 60s
run plugin list

step "Uninstall the view with --purge: its grant and the webdav-credentials Secret go too; the CSV files stay yours"
run plugin uninstall records --purge --yes --wait 60s
run plugin list

printf '\n== demo finished in %ss\n' "$(($(date +%s) - start))"
cat <<'EOF'

== next, try the dashboard: every plugin's signature, signer and pending approval, live in your browser
  .bin/openfief dev                      # terminal 1: the platform, until Ctrl-C
  source .openfief-dev/env               # terminal 2, then:
  .bin/openfief plugin install fx --image "$OPENFIEF_DEMO_IMAGE_V1"
  .bin/openfief dashboard                # prints the URL with this run's token and opens your browser
EOF
