#!/usr/bin/env bash
# The connector contract's tooling (D-11, D-49), offline: buf and the protoc
# plugins are built from the pinned module hack/tools/proto into .bin/.
#
#   hack/proto.sh gen     regenerate sdk/go/gen from proto/
#   hack/proto.sh check   lint; breaking check against PROTO_BASE (default
#                         HEAD~1, the previous commit); fail when sdk/go/gen
#                         differs from what proto/ generates
#   hack/proto.sh tools   only build the tools into .bin/
#
# PROTO_BASE names the git revision whose contract `check` must stay
# compatible with. When that revision has no proto/ directory (the contract is
# new) the breaking check is skipped with a note; when PROTO_BASE was set
# explicitly and does not resolve, `check` fails.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

tools_mod=hack/tools/proto
bin=$root/.bin
stamp=$bin/.proto-tools.sum

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# tools builds buf, protoc-gen-go and protoc-gen-connect-go into .bin/, only
# when one is missing or the pins in hack/tools/proto changed since the last
# build.
tools() {
  mkdir -p "$bin"
  local want
  want=$(cat "$tools_mod/go.mod" "$tools_mod/go.sum" | sha256sum | cut -d' ' -f1)
  if [[ -x $bin/buf && -x $bin/protoc-gen-go && -x $bin/protoc-gen-connect-go && -f $stamp && $(cat "$stamp") == "$want" ]]; then
    return 0
  fi
  echo "building buf and protoc plugins from $tools_mod into .bin/" >&2
  (
    cd "$tools_mod"
    export GOWORK=off
    go build -o "$bin/buf" github.com/bufbuild/buf/cmd/buf
    go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
    go build -o "$bin/protoc-gen-connect-go" connectrpc.com/connect/cmd/protoc-gen-connect-go
  )
  echo "$want" >"$stamp"
}

buf() {
  "$bin/buf" "$@"
}

gen() {
  tools
  buf generate
}

lint() {
  echo "== buf lint" >&2
  buf lint
}

breaking() {
  local base=${PROTO_BASE:-HEAD~1}
  if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
    if [[ -n ${PROTO_BASE:-} ]]; then
      echo "PROTO_BASE=$PROTO_BASE does not name a commit" >&2
      return 1
    fi
    echo "note: $base does not exist (first commit or shallow clone); breaking check skipped" >&2
    return 0
  fi
  if [[ -z $(git ls-tree -r --name-only "$base" -- proto | grep '\.proto$' || true) ]]; then
    echo "note: $base has no contract under proto/; breaking check skipped" >&2
    return 0
  fi
  echo "== buf breaking against $base" >&2
  local tmp=$work/base
  mkdir -p "$tmp"
  # The base's own contract, with this tree's buf.yaml so both sides build
  # the same module layout.
  git archive "$base" proto | tar -x -C "$tmp"
  cp buf.yaml "$tmp/buf.yaml"
  buf breaking --against "$tmp"
}

stale() {
  echo "== generated code up to date" >&2
  local tmp=$work/gen
  buf generate -o "$tmp"
  if ! diff -r "$tmp/sdk/go/gen" sdk/go/gen >"$tmp/diff"; then
    cat "$tmp/diff" >&2
    echo "sdk/go/gen is stale: run hack/proto.sh gen and commit the result" >&2
    return 1
  fi
}

check() {
  tools
  lint
  breaking
  stale
}

case ${1:-} in
gen) gen ;;
check) check ;;
tools) tools ;;
*)
  echo "usage: $0 gen|check|tools" >&2
  exit 2
  ;;
esac
