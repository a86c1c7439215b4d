#!/usr/bin/env bash
# Installs sdk/ts's npm packages (protoc-gen-es, TypeScript, prettier and the
# SDK's dependencies) with `npm ci` from package-lock.json, only when
# node_modules is missing or the lock file changed since the last install.
# make ts-deps (and through it make test-deps and make ts-image), make
# test-ts and make verify (through hack/build/proto.sh) all call it; the
# stamp it writes is what internal/images checks before it compiles a
# TypeScript plugin. CI runs make test and make verify at once: a lock makes the second
# caller wait for the first install and then find it done, instead of two
# `npm ci` deleting each other's files in one directory.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root/sdk/ts"

mkdir -p "$root/.bin"
exec 9>"$root/.bin/.ts-deps.lock"
flock 9

stamp=node_modules/.openfief-lock.sum
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
	exit 0
fi
echo "installing sdk/ts's npm packages from package-lock.json" >&2
npm ci --ignore-scripts --no-audit --no-fund >&2
echo "$want" >"$stamp"
