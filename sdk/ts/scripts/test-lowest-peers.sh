#!/usr/bin/env bash
# Builds, type-checks and tests the SDK against the lowest versions its peer
# dependency ranges admit (the protobuf and Connect runtimes a plugin
# installs beside the SDK), so the low end of each range is one that was
# tested; make test-ts tests the versions package.json pins for development,
# the high end. It works in a temporary copy of the package, with every other
# package at its locked version, and leaves sdk/ts untouched; the tools that
# neither build nor test are left out (protoc-gen-es, whose peer is the
# pinned runtime, the linter, the formatter). It needs the npm registry.
# make test-ts-peers runs it.
set -euo pipefail

ts="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
mkdir "${tmp}/ts"
cp -R "${ts}/src" "${ts}/test" "${ts}/bench" "${ts}/examples" "${ts}/tsconfig.json" "${ts}/tsconfig.test.json" \
	"${ts}/package.json" "${ts}/package-lock.json" "${ts}/LICENSE" "${ts}/README.md" "${tmp}/ts/"
# The tests read the shared conformance vectors from ../testdata.
ln -s "${ts}/../testdata" "${tmp}/testdata"
cd "${tmp}/ts"

# Each peer range is ^X.Y.Z; its lowest version, X.Y.Z, replaces the pinned
# development version.
# shellcheck disable=SC2016 # JavaScript: ${...} in it are template literals
node --input-type=module -e '
import { readFileSync, writeFileSync } from "node:fs";
const p = JSON.parse(readFileSync("package.json", "utf8"));
for (const [name, range] of Object.entries(p.peerDependencies ?? {})) {
  const m = /^\^(\d+\.\d+\.\d+)$/.exec(range);
  if (!m) throw new Error(`peer ${name}: range ${range} is not ^X.Y.Z`);
  p.devDependencies[name] = m[1];
}
for (const tool of ["@bufbuild/protoc-gen-es", "@eslint/js", "eslint", "prettier", "typescript-eslint"]) {
  delete p.devDependencies[tool];
}
writeFileSync("package.json", JSON.stringify(p, null, 2) + "\n");
'
echo "installing the lowest peer versions in ${tmp}/ts" >&2
npm install --ignore-scripts --no-audit --no-fund >&2
npm ls --depth=0 >&2
npm run build
npm run typecheck
npm run build:test
npm test
