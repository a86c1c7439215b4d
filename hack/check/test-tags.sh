#!/usr/bin/env bash
# Fails when a test file is built without the build tag it needs, so `make
# test-unit` (go test with no tag) would run it:
#   - `//go:build cluster` on a _test.go file that imports internal/devcluster,
#     internal/devstack or internal/operator/operatortest (it starts a control
#     plane);
#   - `//go:build heavy` on one that starts PostgreSQL (imports
#     internal/core/store/pgtest) or builds images or a release
#     (images.Build, images.BuildTSExample, release.Make, or Build(ctx, ...)
#     and sharedBuild in internal/images' own tests): they take minutes, and
#     the builds read the tree in child processes, which go test's cache
#     does not see.
# `make test` passes both tags and runs them; `make verify` runs this check.
#
# Usage: hack/check/test-tags.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

module=github.com/arkadiuss/openfief
# An import line of one of the packages, aliased or not.
imports="^[[:space:]]*(import[[:space:]]+)?([A-Za-z_.][A-Za-z0-9_]*[[:space:]]+)?\"${module}/internal/(devcluster|devstack|operator/operatortest)\""
# The same for the PostgreSQL test server, and the calls that build images
# or a release.
pgtest="^[[:space:]]*(import[[:space:]]+)?([A-Za-z_.][A-Za-z0-9_]*[[:space:]]+)?\"${module}/internal/core/store/pgtest\""
builds='(^|[^.[:alnum:]_])(sharedBuild\(|Build\((ctx|context\.)|BuildTSExample\()|(images\.Build|images\.BuildTSExample|release\.Make)\('

status=0
for m in . sdk/go; do
	# The test files go would build without the tag, one path a line,
	# relative to the repository.
	files=$(cd "${m}" && go list -e -f '{{$d := .Dir}}{{range .TestGoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .XTestGoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}' ./...)
	while IFS= read -r f; do
		[[ -n ${f} ]] || continue
		rel=${f#"${PWD}/"}
		if pkg=$(grep -m1 -oE "${imports}" "${f}"); then
			pkg=${pkg##*\"${module}/}
			pkg=${pkg%\"}
			echo "${rel}: imports ${pkg} but lacks the build tag: put \`//go:build cluster\` and a blank line above its package clause (make test runs it, make test-unit leaves it out)" >&2
			status=1
		fi
		why=""
		if grep -qE "${pgtest}" "${f}"; then
			why="imports internal/core/store/pgtest"
		elif call=$(grep -m1 -oE "${builds}" "${f}"); then
			call=${call#[^[:alnum:]_]}
			why="builds images or a release (calls ${call%%(*})"
		fi
		if [[ -n ${why} ]]; then
			echo "${rel}: ${why} but lacks a build tag: put \`//go:build heavy\` and a blank line above its package clause, in a file of its own if its other tests are fast (make test and make test-heavy run it, make test-unit leaves it out)" >&2
			status=1
		fi
	done <<<"${files}"
done
exit "${status}"
