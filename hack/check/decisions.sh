#!/usr/bin/env bash
# Fails when a file cites a decision that docs/decisions.md does not explain.
#
# Citations are D-nn (specification decisions), OF-n (this project's own),
# R-nn (records) and P-n/P-nn (open proposals; three-digit P-256 and the like
# are elliptic curves, not citations). Every one cited in a tracked file other
# than docs/decisions.md needs a heading "## D-nn: ..." (any level) there.
# Citations of "DESIGN.md point N", a file outside the repository, are refused
# too: OF-N is its name now. So are references that lead nowhere a reader can
# follow ("issue N", "finding N", "review finding N"): a comment states the
# reason itself. Decision ids stay out of what readers without
# docs/decisions.md see: Go string literals outside tests (flag help, CLI
# help, errors; hack/check/userstrings), the Apache-2.0 SDK (sdk/, and proto/,
# whose comments become its generated godoc) and the CRDs (deploy/crds, whose
# descriptions `kubectl explain` shows: in api/, a type's ids go after a
# "---" line, which controller-gen leaves out of the description).
#
# Usage: hack/check/decisions.sh [--untracked]
#   --untracked  also search files git does not track yet (ignored files stay out)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

doc=docs/decisions.md
grep_opts=(-I)
case "${1:-}" in
	"") ;;
	--untracked) grep_opts+=(--untracked) ;;
	*) echo "usage: $0 [--untracked]" >&2; exit 2 ;;
esac
[[ -f $doc ]] || { echo "$doc is missing" >&2; exit 1; }

# Every numbered heading of the decisions page: D-16, OF-2, ...
documented=$(grep -oE '^#+ +(D|OF|R|P)-[0-9]+:' "$doc" | grep -oE '(D|OF|R|P)-[0-9]+' | sort -u)

# path:line:citation for every citation outside the decisions page.
cited=$(git grep "${grep_opts[@]}" -n -o -w -E '(D|OF|R)-[0-9]+|P-[0-9]{1,2}' -- . ":(exclude)$doc" || true)

fail=0
missing=$(printf '%s\n' "$cited" | awk -F: 'NF >= 3 {print $NF}' | sort -u | comm -23 - <(printf '%s\n' "$documented"))
for id in $missing; do
	where=$(printf '%s\n' "$cited" | awk -F: -v id="$id" '$NF == id {print $1 ":" $2}')
	first=$(printf '%s\n' "$where" | head -n 1)
	files=$(printf '%s\n' "$where" | cut -d: -f1 | sort -u | wc -l)
	more=""
	[[ $files -gt 1 ]] && more=" (and $((files - 1)) more file(s))"
	echo "$id is cited in $first$more but has no heading in $doc"
	fail=1
done

# Old citations of a design note that is not in the repository (also when the
# phrase is wrapped after "DESIGN.md").
old=$(git grep "${grep_opts[@]}" -n -E 'DESIGN\.md point [0-9]+|DESIGN\.md$' -- . ":(exclude)$doc" || true)
if [[ -n $old ]]; then
	printf '%s\n' "$old" | while IFS= read -r line; do
		echo "${line%%:*}:$(cut -d: -f2 <<<"$line"): cites DESIGN.md, which is not in the repository; cite OF-N (DESIGN.md point N) from $doc"
	done
	fail=1
fi

# References to an issue tracker or a review that the repository does not hold.
dangling=$(git grep "${grep_opts[@]}" -n -i -E '\b(review )?findings? [0-9]+|\bissues? #?[0-9]+' -- . ':(exclude)hack/check/decisions.sh' || true)
if [[ -n $dangling ]]; then
	printf '%s\n' "$dangling" | while IFS= read -r line; do
		echo "${line%%:*}:$(cut -d: -f2 <<<"$line"): cites an issue or review finding no reader can follow; state the reason itself"
	done
	fail=1
fi

# Decision ids where readers cannot look them up.
sdk=$(printf '%s\n' "$cited" | grep -E '^(sdk/|proto/|deploy/crds/openfief\.io_)' || true)
if [[ -n $sdk ]]; then
	printf '%s\n' "$sdk" | while IFS= read -r line; do
		echo "${line%%:*}:$(cut -d: -f2 <<<"$line"): the SDK, its contract and the CRDs' descriptions are read without docs/decisions.md; say the reason instead of $(awk -F: '{print $NF}' <<<"$line") (in api/, ids go after a \"---\" line, which the CRD leaves out)"
	done
	fail=1
fi
mapfile -t gofiles < <(git ls-files '*.go' ':!:*_test.go')
if ! go run ./hack/check/userstrings "${gofiles[@]}"; then
	fail=1
fi

if [[ $fail -ne 0 ]]; then
	echo "check/decisions: fix the lines above; a cited decision needs a heading \"### ID: what was decided\" and a few lines why in $doc" >&2
	exit 1
fi
count=$(printf '%s\n' "$cited" | awk -F: 'NF >= 3' | wc -l)
ids=$(printf '%s\n' "$cited" | awk -F: 'NF >= 3 {print $NF}' | sort -u | wc -l)
echo "check/decisions: $count citations of $ids decisions, all explained in $doc"
