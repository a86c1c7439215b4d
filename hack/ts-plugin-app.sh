#!/usr/bin/env bash
# ts-plugin-app.sh SRC OUT writes a TypeScript plugin's /app into the empty
# or missing folder OUT, from the plugin's sources in SRC (main.ts and the
# modules it imports, such as sdk/ts/examples/fx-rates):
#   OUT/main.js, ...                   SRC compiled by sdk/ts's TypeScript;
#   OUT/package.json                   {"type": "module"}, so Node.js loads
#                                      the .js files as ES modules;
#   OUT/node_modules/@openfief/sdk/    the SDK compiled from sdk/ts/src,
#                                      with its package.json and LICENSE;
#   OUT/node_modules/...               the SDK's dependencies and its peer
#                                      dependencies (the protobuf and Connect
#                                      runtimes, which a plugin installs
#                                      beside the SDK), with theirs, as npm ci
#                                      installed them from
#                                      sdk/ts/package-lock.json; nothing else.
# It writes nothing under sdk/ts but what hack/ts-deps.sh installs, so it can
# run while make test-ts builds there. internal/images.NodePluginIndex packs
# OUT as the image's application layer.
set -euo pipefail

src="$(cd "${1:?usage: ts-plugin-app.sh SRC OUT}" && pwd)"
out="${2:?usage: ts-plugin-app.sh SRC OUT}"
root="$(cd "$(dirname "$0")/.." && pwd)"
sdk="${root}/sdk/ts"
if [[ -e "${out}" && -n "$(ls -A "${out}")" ]]; then
	echo "ts-plugin-app: ${out} is not empty" >&2
	exit 2
fi
[[ -f "${src}/main.ts" ]] || {
	echo "ts-plugin-app: ${src} has no main.ts" >&2
	exit 2
}
mkdir -p "${out}"
out="$(cd "${out}" && pwd)"

# runtime_deps prints the directory of every package the SDK needs at run
# time: its dependencies and non-optional peer dependencies, recursively,
# each resolved as Node.js resolves it from its dependent's directory.
# shellcheck disable=SC2016 # JavaScript: ${...} in it are template literals
runtime_deps='
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
const sdk = process.argv[1];
const seen = new Set();
function resolve(from, name) {
  for (let dir = from; ; dir = dirname(dir)) {
    const p = join(dir, "node_modules", name);
    if (existsSync(join(p, "package.json"))) return p;
    if (dir === sdk || dir === dirname(dir)) throw new Error(`${name} is not installed for ${from}`);
  }
}
function walk(dir) {
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  const peers = Object.keys(pkg.peerDependencies ?? {});
  const names = [
    ...Object.keys(pkg.dependencies ?? {}),
    ...peers.filter((n) => !pkg.peerDependenciesMeta?.[n]?.optional),
  ];
  for (const name of names) {
    const p = resolve(dir, name);
    if (seen.has(p)) continue;
    seen.add(p);
    console.log(p);
    walk(p);
  }
}
walk(sdk);
'

"${root}/hack/ts-deps.sh"
tsc="${sdk}/node_modules/.bin/tsc"
mods="${out}/node_modules"
pkg="${mods}/@openfief/sdk"

# The SDK, as npm pack would ship it: dist/, package.json, LICENSE, README.
"${tsc}" -p "${sdk}/tsconfig.json" --outDir "${pkg}/dist"
cp "${sdk}/package.json" "${sdk}/LICENSE" "${sdk}/README.md" "${pkg}/"

# Its dependencies and peer dependencies, and theirs, copied as installed:
# the packages Node.js resolves them to from each dependent's directory. The
# lock file marks the peers dev (the SDK builds against them), so npm ls
# --omit=dev would leave them out.
deps="$(node --input-type=module -e "${runtime_deps}" "${sdk}")"
while IFS= read -r dep; do
	rel="${dep#"${sdk}/node_modules/"}"
	if [[ "${rel}" == "${dep}" ]]; then
		echo "ts-plugin-app: dependency ${dep} is outside ${sdk}/node_modules" >&2
		exit 1
	fi
	mkdir -p "$(dirname "${mods}/${rel}")"
	cp -R "${dep}" "${mods}/${rel}"
done <<<"${deps}"

# The plugin, its "@openfief/sdk" resolved to the copy above.
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
cat >"${tmp}/tsconfig.json" <<EOF
{
  "extends": "${sdk}/tsconfig.json",
  "compilerOptions": {
    "rootDir": "${src}",
    "outDir": "${out}",
    "declaration": false,
    "typeRoots": ["${sdk}/node_modules/@types"],
    "paths": { "@openfief/sdk": ["${pkg}/dist/index.d.ts"] }
  },
  "include": ["${src}/*.ts"]
}
EOF
"${tsc}" -p "${tmp}/tsconfig.json"
printf '{\n  "private": true,\n  "type": "module"\n}\n' >"${out}/package.json"
