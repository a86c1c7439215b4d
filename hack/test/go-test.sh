#!/usr/bin/env bash
# go-test.sh runs every Go test of every module for make test, the cluster
# tag's too.
#
# The packages that start a real node (NODE_PACKAGES) take turns on the
# machine's node lock, so their node time adds up: it is the longest chain of
# make test (about nine minutes on two cores). A single go test starts them
# only when earlier packages free a slot, minutes in. So they run in a go test
# of their own, started first, beside one for everything else, and the chain
# begins at once. The TypeScript SDK's tests run once the chain has begun,
# then the rest of the root module, then the other modules.
#
# Usage: hack/test/go-test.sh
#
# Environment (the Makefile sets them):
#   GO, TREE_ENV_GOFLAGS   the go command and the tree's GOFLAGS
#   TAGS                   build tags (cluster)
#   TEST_TIMEOUT           one test binary's bound
#   TEST_PARALLEL          test binaries at once in the go test of the rest
#   MODULES                the workspace's modules, space-separated
#   NODE_PACKAGES          the root module's real-node packages, space-separated
#   TS_TEST                the command that runs the TypeScript SDK's tests (plain
#                          make: a recipe naming $(MAKE) runs even under make -n)
set -euo pipefail
cd "$(dirname "$0")/../.."

export CGO_ENABLED=0 GOFLAGS="${TREE_ENV_GOFLAGS}"
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
status=0
${TS_TEST} || status=$?
echo "== go test -tags ${TAGS} . (the rest)"
"${gotest[@]}" -p "${TEST_PARALLEL}" "${rest[@]}" || ((status = status ? status : $?))
for m in ${MODULES}; do
	[[ ${m} == . ]] && continue
	echo "== go test -tags ${TAGS} ${m}"
	(cd "${m}" && "${gotest[@]}" -p "${TEST_PARALLEL}" ./...) || ((status = status ? status : $?))
done
wait "${node_pid}" || ((status = status ? status : $?))
exit "${status}"
