// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// The example connector (examples/fx-rates) run as its own process, the way
// its pod runs it: configured only by the environment the operator sets,
// called by a gRPC client with core tokens, reaching its bank through a
// CONNECT proxy, and stopped with SIGTERM.

import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, readFileSync } from "node:fs";
import { createServer as createHTTPSServer } from "node:https";
import { connect, createServer, type AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  ConnectorService,
  FileHeaderSchema,
  ImportFileRequestSchema,
  IngestMode,
  type ImportFileRequest,
} from "../src/gen/openfief/connector/v1/connector_pb.js";
import { Severity } from "../src/gen/openfief/connector/v1/connector_pb.js";
import {
  ConnectProxy,
  KubeletDir,
  jwksDir,
  newKey,
  packageDir,
  signToken,
  tempDir,
  testIssuer,
  testInstance,
  testSubject,
} from "./helpers.js";

// The name the test certificate is for; the proxy alone resolves it.
const bank = "institution.test";
const certFile = join(packageDir, "test", "testdata", "target-cert.pem");
const key = newKey("rsa-a", "RS256");
const tmp = tempDir();
const asked: string[] = [];
let plugin: ChildProcess;
let stderr = "";
let base: string;
let proxy: ConnectProxy;
const closers: (() => void)[] = [];

async function freePort(): Promise<number> {
  const s = createServer().listen(0, "127.0.0.1");
  await once(s, "listening");
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

/** Resolves once something accepts connections on port. */
async function listening(port: number): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, "127.0.0.1", () => {
        s.destroy();
        resolve(true);
      });
      s.once("error", () => resolve(false));
    });
    if (ok) return;
    if (plugin.exitCode !== null) assert.fail(`the plugin exited: ${stderr}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail("the plugin never listened");
}

before(async () => {
  const bankServer = createHTTPSServer(
    {
      cert: readFileSync(certFile),
      key: readFileSync(join(packageDir, "test", "testdata", "target-key.pem")),
    },
    (req, res) => {
      asked.push(req.url ?? "");
      res.setHeader("content-type", "application/json");
      res.end(
        JSON.stringify([
          { date: "2026-03-30", currency: "EUR", rate: "4.2843" },
          { date: "2026-03-31", currency: "EUR", rate: "4.2901E0" },
          { date: "2026-03-31", currency: "USD", rate: "not a rate" },
        ]),
      );
    },
  );
  bankServer.listen(0, "127.0.0.1");
  await once(bankServer, "listening");
  closers.push(() => bankServer.close());
  proxy = new ConnectProxy((bankServer.address() as AddressInfo).port, bank);
  proxy.server.listen(0, "127.0.0.1");
  await once(proxy.server, "listening");
  closers.push(() => proxy.server.close());

  const keysDir = join(tmp.dir, "sa-jwks");
  const egressDir = join(tmp.dir, "egress");
  mkdirSync(keysDir);
  mkdirSync(egressDir);
  await jwksDir(keysDir, testIssuer, [key]);
  new KubeletDir(egressDir, ["token"]).write({ token: "egress-token" });

  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  plugin = spawn(process.execPath, [join(packageDir, "build", "examples", "fx-rates", "main.js")], {
    env: {
      PATH: process.env["PATH"],
      OPENFIEF_LISTEN_PORT: String(port),
      OPENFIEF_INSTANCE: testInstance,
      OPENFIEF_CORE_SUBJECT: testSubject,
      OPENFIEF_SA_JWKS_DIR: keysDir,
      OPENFIEF_EGRESS_TOKEN_FILE: join(egressDir, "token"),
      HTTPS_PROXY: proxy.url,
      OPENFIEF_CONFIG: JSON.stringify({ host: bank, quote: "PLN" }),
      // The test bank's certificate; a real bank's chains to the system's roots.
      NODE_EXTRA_CA_CERTS: certFile,
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  plugin.stderr?.on("data", (b: Buffer) => (stderr += b.toString()));
  await listening(port);
});

after(() => {
  if (plugin.exitCode === null) plugin.kill("SIGKILL");
  for (const c of closers) c();
  tmp.cleanup();
});

function client() {
  return createClient(ConnectorService, createGrpcTransport({ baseUrl: base }));
}

test("the core's Sync gets the bank's rates, exact, with a problem for the unreadable one", async () => {
  const res = await client().sync(
    { batchId: "b-1", watermark: "2026-03-29" },
    { headers: { authorization: `Bearer ${await signToken(key)}` } },
  );
  const d = res.delivery;
  assert.ok(d);
  assert.equal(d.batchId, "b-1");
  assert.equal(d.watermark, "2026-03-31");
  assert.deepEqual(
    d.fxRates.map((r) => `${r.date} ${r.baseCurrency}/${r.quoteCurrency} ${r.rate}`),
    ["2026-03-30 EUR/PLN 4.2843", "2026-03-31 EUR/PLN 4.2901"],
  );
  assert.deepEqual(
    d.problems.map((p) => [Severity[p.severity], p.code, p.location]),
    [["ERROR", "unreadable_rate", "rates[2]"]],
  );
  assert.deepEqual(asked, ["/rates?quote=PLN&since=2026-03-29"]);
});

test("a token for another instance is refused before the bank is asked", async () => {
  const before = asked.length;
  await assert.rejects(
    client().sync(
      { batchId: "b-2" },
      { headers: { authorization: `Bearer ${await signToken(key, { instance: "ibkr-flex" })}` } },
    ),
    (e: unknown) => ConnectError.from(e).code === Code.Unauthenticated,
  );
  assert.equal(asked.length, before);
});

test("a statement file is imported over ImportFile", async () => {
  async function* file(): AsyncIterable<ImportFileRequest> {
    yield create(ImportFileRequestSchema, {
      message: {
        case: "header",
        value: create(FileHeaderSchema, {
          batchId: "f-1",
          mode: IngestMode.PREVIEW,
          fileName: "rates.csv",
        }),
      },
    });
    yield create(ImportFileRequestSchema, {
      message: { case: "chunk", value: Buffer.from("date,currency,rate\n2026-03-") },
    });
    yield create(ImportFileRequestSchema, {
      message: { case: "chunk", value: Buffer.from("31,CHF,4.7712\n") },
    });
  }
  const res = await client().importFile(file(), {
    headers: { authorization: `Bearer ${await signToken(key)}` },
  });
  assert.deepEqual(
    res.delivery?.fxRates.map((r) => `${r.date} ${r.baseCurrency} ${r.rate}`),
    ["2026-03-31 CHF 4.7712"],
  );
});

test("a bank it cannot reach is unavailable, so the core tries the batch again", async () => {
  proxy.refuse = true;
  try {
    await assert.rejects(
      client().sync(
        { batchId: "b-3" },
        { headers: { authorization: `Bearer ${await signToken(key)}` } },
      ),
      (e: unknown) => ConnectError.from(e).code === Code.Unavailable,
    );
  } finally {
    proxy.refuse = false;
  }
});

test("SIGTERM stops the plugin cleanly", async () => {
  plugin.kill("SIGTERM");
  const [code] = (await once(plugin, "exit")) as [number | null];
  assert.equal(code, 0, stderr);
});
