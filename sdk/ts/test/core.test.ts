// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { CoreClient, TokenFile, newCoreClient } from "../src/index.js";
import { KubeletDir, tempDir } from "./helpers.js";

// A real HTTP server on loopback stands in for the core's API.
let core: Server;
let base: URL;
const seen: { path: string; auth: string | undefined }[] = [];
const tmp = tempDir();
let tokens: KubeletDir;

before(async () => {
  core = createServer((req, res) => {
    seen.push({ path: req.url ?? "", auth: req.headers.authorization });
    if (req.url === "/moved") res.writeHead(302, { location: "/v1/elsewhere" }).end();
    else res.end("ok");
  });
  core.listen(0, "127.0.0.1");
  await once(core, "listening");
  base = new URL(`http://127.0.0.1:${(core.address() as AddressInfo).port}`);
  tokens = new KubeletDir(tmp.dir, ["token"]);
  tokens.write({ token: "core-token-1" });
});
after(() => {
  core.close();
  core.closeAllConnections();
  tmp.cleanup();
});

test("the core client sends the current core token to the core, and only there", async () => {
  const c = newCoreClient({
    OPENFIEF_CORE_ADDRESS: base.host,
    OPENFIEF_TOKEN_FILE: join(tmp.dir, "token"),
  });
  assert.equal(await (await c.fetch("/v1/status")).text(), "ok");
  tokens.write({ token: "core-token-2" });
  await c.fetch("/v1/status");
  assert.deepEqual(seen.slice(-2), [
    { path: "/v1/status", auth: "Bearer core-token-1" },
    { path: "/v1/status", auth: "Bearer core-token-2" },
  ]);
  const before = seen.length;
  await assert.rejects(c.fetch("http://127.0.0.2:1/steal"), /request is not for the core/);
  await assert.rejects(c.fetch(`https://${base.host}/v1/status`), /request is not for the core/);
  await assert.rejects(c.fetch("/moved"), TypeError, "a redirect was followed");
  assert.deepEqual(
    seen.slice(before).map((s) => s.path),
    ["/moved"],
  );
  const missing = new CoreClient(base, new TokenFile(join(tmp.dir, "missing")));
  await assert.rejects(missing.fetch("/v1/status"), /core client: token file/);
  assert.equal(seen.length, before + 1, "a request went out without a token");
});
