// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// Token files on a real file system, laid out as the kubelet lays out
// projected volumes.

import assert from "node:assert/strict";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { TokenFile, coreTokenFile } from "../src/index.js";
import { KubeletDir, tempDir } from "./helpers.js";

test("a token file is read afresh on every call, as the kubelet rotates it", async (t) => {
  const tmp = tempDir();
  t.after(tmp.cleanup);
  const d = new KubeletDir(tmp.dir, ["token"]);
  d.write({ token: "first-token\n" });
  const f = new TokenFile(join(tmp.dir, "token"));
  assert.equal(await f.read(), "first-token");
  d.write({ token: "  second-token \t\n" });
  assert.equal(await f.read(), "second-token");
});

test("a token file refuses what is not a token, naming the file and never the content", async (t) => {
  const tmp = tempDir();
  t.after(tmp.cleanup);
  const outside = tempDir();
  t.after(outside.cleanup);
  writeFileSync(join(outside.dir, "token"), "outside-secret");
  mkdirSync(join(tmp.dir, "sub"));
  const cases: Record<string, [string, RegExp]> = {
    empty: [" \n", /token file is empty/],
    "a space inside": ["abc def", /holds a byte a token never contains/],
    "non-ASCII": ["tökén", /holds a byte a token never contains/],
    "too large": ["x".repeat((64 << 10) + 1), /larger than 65536 bytes/],
  };
  for (const [name, [content, want]] of Object.entries(cases)) {
    const path = join(tmp.dir, name.replace(/ /g, "-"));
    writeFileSync(path, content);
    await assert.rejects(new TokenFile(path).read(), (e: Error) => {
      assert.match(e.message, want);
      assert.ok(e.message.includes(path), "the error does not name the file");
      if (content.trim() !== "") assert.ok(!e.message.includes(content.trim().slice(0, 8)));
      return true;
    });
  }
  symlinkSync(join(outside.dir, "token"), join(tmp.dir, "escape"));
  await assert.rejects(new TokenFile(join(tmp.dir, "escape")).read(), (e: Error) => {
    assert.match(e.message, /leads out of its directory/);
    assert.ok(!e.message.includes("outside-secret"));
    return true;
  });
  await assert.rejects(new TokenFile(join(tmp.dir, "missing")).read(), /ENOENT/);
  await assert.rejects(new TokenFile(join(tmp.dir, "sub")).read(), /not a regular file/);
  assert.throws(() => new TokenFile(""), /empty path/);
  assert.throws(() => new TokenFile("/var/run/"), /not a file name/);
  assert.equal(coreTokenFile({}).path, "/var/run/secrets/openfief/token");
  assert.equal(coreTokenFile({ OPENFIEF_TOKEN_FILE: "/t/core" }).path, "/t/core");
});
