#!/usr/bin/env bash
# go-test.sh runs the Go tests of every module: every one, the cluster and
# heavy tags' too, for make test; the fast ones for make test-unit.
#
# make test: the packages that start a real node (NODE_PACKAGES) take turns
# on the machine's node lock, so their node time adds up: it is the longest
# chain of make test (about fifteen minutes on two cores, the rest about
# twelve beside it; docs/development.md says what each package starts). A
# single go test starts them only when earlier packages free a slot, minutes
# in. So they run in a go test of their own, started first, beside one for
# everything else, and the chain begins at once. The rest runs at nice 10
# (REST_NICE), so it takes only the CPU the chain leaves. The TypeScript
# SDK's tests run once the chain has begun, then the rest of the root module,
# then the other modules. Every test runs (-count=1): the heavy ones build
# from the tree in child processes, whose reads go test's cache does not see.
#
# make test-unit (go-test.sh unit): the tests with neither tag, with go
# test's cache, so a package whose code, opened files and environment did
# not change reports its last result. The TypeScript SDK's tests run beside
# them, and not at all when sdk/ts and sdk/testdata (what they read) and
# Node.js are as at their last pass (.cache/test-ts.pass).
#
# Usage: hack/test/go-test.sh [unit]
#
# Environment (the Makefile sets them):
#   GO, TREE_ENV_GOFLAGS   the go command and the tree's GOFLAGS
#   TAGS                   build tags (cluster,heavy; unused by unit)
#   TEST_TIMEOUT           one test binary's bound
#   TEST_PARALLEL          test binaries at once in the go test of the rest
#   MODULES                the workspace's modules, space-separated
#   NODE_PACKAGES          the root module's real-node packages, space-separated
#   REST_NICE              the rest's niceness (default 10)
#   TS_TEST                the command that runs the TypeScript SDK's tests (plain
#                          make: a recipe naming $(MAKE) runs even under make -n)
set -euo pipefail
cd "$(dirname "$0")/../.."

export CGO_ENABLED=0 GOFLAGS="${TREE_ENV_GOFLAGS}"

if [[ ${1:-} == unit ]]; then
	# The inputs of the TypeScript SDK's tests, as one hash: Node.js's
	# version and every file git would see under sdk/ts (node_modules by its
	# lock file; dist and build are outputs) and sdk/testdata.
	ts_inputs() {
		node --version
		git ls-files -z -c -o --exclude-standard -- sdk/ts sdk/testdata | sort -z |
			while IFS= read -r -d '' f; do
				[[ -f ${f} ]] && sha256sum -- "${f}"
			done
		true
	}
	mkdir -p .cache
	pass=.cache/test-ts.pass
	ts_log=$(mktemp)
	trap 'rm -f "${ts_log}"' EXIT
	(
		sum=$(ts_inputs | sha256sum | cut -d' ' -f1)
		if [[ -f ${pass} && $(cat "${pass}") == "${sum}" ]]; then
			echo "sdk/ts and sdk/testdata as at the last pass: skipped (remove ${pass} to run it)"
			exit 0
		fi
		rm -f "${pass}"
		${TS_TEST} && echo "${sum}" >"${pass}"
	) >"${ts_log}" 2>&1 &
	ts_pid=$!
	status=0
	for m in ${MODULES}; do
		echo "== go test ${m}"
		(cd "${m}" && "${GO}" test -timeout "${TEST_TIMEOUT}" ./...) || ((status = status ? status : $?))
	done
	echo "== make test-ts (beside the Go tests)"
	wait "${ts_pid}" || ((status = status ? status : $?))
	cat "${ts_log}"
	exit "${status}"
fi

gotest=("${GO}" test -count=1 -vet=off -tags "${TAGS}" -timeout "${TEST_TIMEOUT}")

read -r -a node_pkgs <<<"${NODE_PACKAGES}"
rest=()
while IFS= read -r pkg; do
	skip=""
	for n in "${node_pkgs[@]}"; do
		[[ ${pkg} == "github.com/arkadiuss/openfief/${n#./}" ]] && skip=1
	done
	[[ -n ${skip} ]] || rest+=("${pkg}")
done < <("${GO}" list -tags "${TAGS}" ./...)

# Each node package waits for the lock while holding a slot of its own, so
# all of them get one. Everything runs to the end, so one run shows every
# failure; the exit status is the first failure's.
echo "== go test -tags ${TAGS} (the real-node packages, beside the rest): ${NODE_PACKAGES}"
"${gotest[@]}" -p "${#node_pkgs[@]}" "${node_pkgs[@]}" &
node_pid=$!
# The rest has minutes to spare beside the chain, which is the longest path
# and mostly waits on pods: the rest runs at a lower priority, so the chain
# has the CPU whenever it wants it and the rest takes what it leaves.
later=(nice -n "${REST_NICE:-10}")
status=0
read -r -a ts_cmd <<<"${TS_TEST}"
"${later[@]}" "${ts_cmd[@]}" || status=$?
echo "== go test -tags ${TAGS} . (the rest, at nice ${REST_NICE:-10})"
"${later[@]}" "${gotest[@]}" -p "${TEST_PARALLEL}" "${rest[@]}" || ((status = status ? status : $?))
for m in ${MODULES}; do
	[[ ${m} == . ]] && continue
	echo "== go test -tags ${TAGS} ${m}"
	(cd "${m}" && "${later[@]}" "${gotest[@]}" -p "${TEST_PARALLEL}" ./...) || ((status = status ? status : $?))
done
wait "${node_pid}" || ((status = status ? status : $?))
exit "${status}"
