#!/usr/bin/env bash
# Fails when a test file that needs the control plane is built without the
# build tag `cluster`, so `make test-unit` (go test with no tag) would start
# one: a _test.go file that imports internal/devcluster, internal/devstack or
# internal/operator/operatortest must begin with `//go:build cluster`.
# `make test` passes -tags cluster and runs it; `make verify` runs this check.
#
# Usage: hack/check/test-tags.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

module=github.com/arkadiuss/openfief
# An import line of one of the packages, aliased or not.
imports="^[[:space:]]*(import[[:space:]]+)?([A-Za-z_.][A-Za-z0-9_]*[[:space:]]+)?\"${module}/internal/(devcluster|devstack|operator/operatortest)\""

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
	done <<<"${files}"
done
exit "${status}"
