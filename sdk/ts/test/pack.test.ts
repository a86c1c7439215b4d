// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// What `npm pack` would publish: the built code with its declarations for
// every export, the licence and the README, and nothing else.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { packageDir } from "./helpers.js";

interface PackResult {
  name: string;
  version: string;
  files: { path: string }[];
}

test("npm pack publishes the built code, its types, the licence and the README only", () => {
  const out = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
    cwd: packageDir,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
  const [pack] = JSON.parse(out) as PackResult[];
  assert.ok(pack);
  assert.equal(pack.name, "@openfief/sdk");
  const files = pack.files.map((f) => f.path).sort();
  for (const f of files) {
    assert.match(
      f,
      /^(dist\/.*\.(js|d\.ts)|LICENSE|README\.md|package\.json)$/,
      `unexpected file ${f}`,
    );
  }
  for (const want of [
    "LICENSE",
    "README.md",
    "package.json",
    "dist/index.js",
    "dist/index.d.ts",
    "dist/verifier.js",
    "dist/delivery/index.js",
    "dist/delivery/index.d.ts",
    "dist/gen/openfief/connector/v1/connector_pb.js",
    "dist/gen/openfief/connector/v1/connector_pb.d.ts",
    "dist/gen/openfief/view/v1/view_pb.js",
    "dist/gen/openfief/view/v1/view_pb.d.ts",
  ]) {
    assert.ok(files.includes(want), `${want} is not published`);
  }
  // Every module has its declarations.
  for (const js of files.filter((f) => f.endsWith(".js"))) {
    assert.ok(files.includes(js.replace(/\.js$/, ".d.ts")), `${js} has no .d.ts`);
  }

  const manifest = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as {
    license: string;
    type: string;
    engines: { node: string };
    exports: Record<string, { types: string; import: string } | string>;
    dependencies: Record<string, string>;
    devDependencies: Record<string, string>;
  };
  assert.equal(manifest.license, "Apache-2.0");
  assert.equal(manifest.type, "module");
  assert.equal(manifest.engines.node, ">=20");
  for (const [name, target] of Object.entries(manifest.exports)) {
    if (typeof target === "string") continue;
    for (const path of [target.types, target.import]) {
      assert.ok(
        files.includes(path.replace(/^\.\//, "")),
        `export ${name}: ${path} is not published`,
      );
    }
  }
  for (const [dep, version] of Object.entries({
    ...manifest.dependencies,
    ...manifest.devDependencies,
  })) {
    assert.match(version, /^[0-9]+\.[0-9]+\.[0-9]+$/, `${dep} is not pinned to one version`);
  }
  const licence = readFileSync(join(packageDir, "LICENSE"), "utf8");
  assert.match(licence, /Apache License\s+Version 2\.0/);
});
