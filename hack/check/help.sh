#!/usr/bin/env bash
# help.sh fails when a line of `make help` is 100 characters or longer, or
# when a target is listed under no group: each target's `## ` text is one
# short sentence, and what does not fit goes into the comment above the
# target. make verify runs it.
set -euo pipefail
cd "$(dirname "$0")/../.."

help="$(make --no-print-directory help)"
status=0
long="$(awk 'length >= 100' <<<"${help}")"
if [[ -n ${long} ]]; then
	echo "make help: lines of 100 characters or more; shorten the target's ## text and move the rest into a comment above it:" >&2
	echo "${long}" >&2
	status=1
fi
if grep -q '^Ungrouped:' <<<"${help}"; then
	echo "make help: targets above the first ##@ group line (put a ##@ line above them):" >&2
	sed -n '/^Ungrouped:/,/^$/p' <<<"${help}" >&2
	status=1
fi
exit "${status}"
