#!/usr/bin/env bash
# Refuses a pipe into `grep -q` (or --quiet) in the project's shell scripts
# and Makefile. grep -q exits at its first match; a writer still writing then
# dies of SIGPIPE, and under `set -o pipefail` the pipeline fails although
# the text was there (what made `make demo` fail at random). Read the output
# into a variable and match that instead: grep -q PATTERN <<<"$out".
set -euo pipefail
cd "$(dirname "$0")/../.."
files=$(git ls-files '*.sh' Makefile .ci/run)
# shellcheck disable=SC2086
if hits=$(grep -nE '\|[[:space:]]*grep[[:space:]]+(-[[:alnum:]]*q|--quiet)' ${files}); then
	echo "a pipe into grep -q fails under pipefail when the writer outlives grep; read the output into a variable first:"
	echo "${hits}"
	exit 1
fi
