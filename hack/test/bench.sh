#!/usr/bin/env bash
# bench.sh is `make bench`: it runs each set of benchmarks and prints it
# through benchstat (pinned in hack/tools/benchstat). The comparisons
# report their references from the same run and the ratios to them
# (sdk/go-jose, sdk/jose, cached/compile, ours/relay-*, ours/smokescreen-*); the
# figures and what limits each are in docs/performance.md.
#
#   hack/test/bench.sh [SET...]   sets: domain sdk sdk-ts configschema proxy proxy-idle (default: all)
#
# Raw results go to .cache/bench/<set>.txt. BENCH_COUNT (default 6) is the
# -count of every set but proxy-idle, which opens ~10,000 tunnels per proxy
# once; sdk-ts is the TypeScript SDK's verifier beside bare jose (npm run
# bench in sdk/ts, after hack/build/ts-deps.sh), -count runs of 2 seconds
# per algorithm, with one token and with two in turn. The proxy sets start
# stripe/smokescreen, built from hack/tools/smokescreen, and say so when it
# cannot be built.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${root}/.cache/bench"
count="${BENCH_COUNT:-6}"
mkdir -p "${out}"

benchstat() {
	(cd "${root}/hack/tools/benchstat" && GOWORK=off GOFLAGS=-mod=readonly go tool benchstat "$@")
}

# run NAME DIR GO-TEST-ARGS...: go test in DIR into .cache/bench/NAME.txt,
# then benchstat of it.
run() {
	local name=$1 dir=$2
	shift 2
	echo "== ${name}: go test -run '^\$' $*"
	(cd "${root}/${dir}" && go test -run '^$' "$@") >"${out}/${name}.txt" || {
		cat "${out}/${name}.txt"
		exit 1
	}
	grep -h 'SKIP' "${out}/${name}.txt" || true
	benchstat "${out}/${name}.txt"
}

# run_ts: the TypeScript SDK's benchmark into .cache/bench/sdk-ts.txt, in
# Go's benchmark format, then benchstat of it.
run_ts() {
	echo "== sdk-ts: npm run bench -- --count ${count}"
	"${root}/hack/build/ts-deps.sh"
	(cd "${root}/sdk/ts" && npm run --silent bench -- --count "${count}") >"${out}/sdk-ts.txt" || {
		cat "${out}/sdk-ts.txt"
		exit 1
	}
	benchstat "${out}/sdk-ts.txt"
}

sets=("$@")
[[ ${#sets[@]} -gt 0 ]] || sets=(domain sdk sdk-ts configschema proxy proxy-idle)
for set in "${sets[@]}"; do
	case ${set} in
	domain) run domain . -bench . -benchmem -count "${count}" ./internal/plugins/ ./internal/trust/... ;;
	sdk) run sdk sdk/go -bench BenchmarkVerify -count "${count}" . ;;
	sdk-ts) run_ts ;;
	configschema) run configschema . -bench BenchmarkValidateCompiledCache -count "${count}" ./internal/configschema/ ;;
	proxy) run proxy . -bench 'BenchmarkCompare(Throughput|NewTunnel)$' -benchtime 2s -count "${count}" ./internal/egress/ ;;
	proxy-idle) run proxy-idle . -bench BenchmarkCompareIdleTunnels -benchtime 1x -count 1 -v ./internal/egress/ ;;
	*)
		echo "unknown set ${set}: domain sdk sdk-ts configschema proxy proxy-idle" >&2
		exit 2
		;;
	esac
done
