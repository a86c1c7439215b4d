#!/usr/bin/env bash
# Lists the packages of the current module whose tests need no control
# plane: those whose test binaries do not link internal/devcluster (the
# local API server built from source). `make test-unit` runs them.
set -euo pipefail
integration=$(go list -test -f '{{.ImportPath}}|{{join .Deps " "}}' ./... |
	awk -F'|' '$1 ~ /\[/ && $2 ~ /internal\/devcluster( |$)/ { split($1, a, " "); sub(/_test$/, "", a[1]); print a[1] }' | sort -u)
go list ./... | grep -vxF -f <(printf '%s\n' ${integration:-/none/}) || true
