#!/usr/bin/env bash
# calls.sh fails when library code (Go outside hack/, not a test) names a path
# under hack/ as a string, the way a program names a script to run: calls go
# from hack/ and the Makefile into internal/, never back. What a library needs
# done it does in Go; what it needs installed, a make target installs first
# and the library only looks it up, naming the target when it is missing.
# make verify runs it.
set -euo pipefail
cd "$(dirname "$0")/../.."

if hits=$(git grep -nE '"hack/|"hack",|"hack"\)' -- '*.go' ':!hack/' ':!*_test.go'); then
	echo "library code names a path under hack/; do the work in Go, or have a make target install what it needs and only look that up:" >&2
	echo "${hits}" >&2
	exit 1
fi
