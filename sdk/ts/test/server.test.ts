// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// The connector and view servers on real servers on loopback, called by real Connect and
// gRPC clients over HTTP/1.1 and h2c.

import assert from "node:assert/strict";
import { once } from "node:events";
import { request as httpRequest } from "node:http";
import { connect as h2connect, type ClientHttp2Session } from "node:http2";
import { after, before, describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import {
  ConnectorService,
  DeliverySchema,
  FileHeaderSchema,
  IngestMode,
  ImportFileRequestSchema,
  type ImportFileRequest,
} from "../src/gen/openfief/connector/v1/connector_pb.js";
import { ExportRequestSchema, ViewService } from "../src/gen/openfief/view/v1/view_pb.js";
import {
  JWKSVerifier,
  createConnectorServer,
  createViewServer,
  receiveFile,
  type ConnectorHandler,
  type PluginServer,
} from "../src/index.js";
import {
  bearer,
  jwksDir,
  newKey,
  publishKeys,
  refusedWith,
  signToken,
  tempDir,
  testIssuer,
  testInstance,
  testSubject,
  type KubeletDir,
  type TestKey,
} from "./helpers.js";

const keyA = newKey("rsa-a", "RS256");
const keyB = newKey("ec-b", "ES256");

/** The file size limit of the test connector's ImportFile. */
const FILE_LIMIT = 1000;

/** A connector that answers Sync with the batch ID and ImportFile with the file's size. */
function testConnector(calls: string[]): ConnectorHandler {
  return {
    async sync(req) {
      calls.push(`sync ${req.batchId}`);
      return { delivery: create(DeliverySchema, { batchId: req.batchId, watermark: "w-1" }) };
    },
    async importFile(requests) {
      const file = await receiveFile(requests, FILE_LIMIT);
      calls.push(`import ${file.header.batchId} ${file.header.fileName} ${file.content.length}`);
      return {
        delivery: create(DeliverySchema, {
          batchId: file.header.batchId,
          watermark: Buffer.from(file.content).toString("utf8"),
        }),
      };
    },
  };
}

async function* stream(...msgs: ImportFileRequest["message"][]): AsyncIterable<ImportFileRequest> {
  for (const message of msgs) yield create(ImportFileRequestSchema, { message });
}

function header(batchId: string): ImportFileRequest["message"] {
  return {
    case: "header",
    value: create(FileHeaderSchema, {
      batchId,
      mode: IngestMode.IMPORT,
      fileName: "statement.csv",
    }),
  };
}

function chunk(s: string): ImportFileRequest["message"] {
  return { case: "chunk", value: Buffer.from(s) };
}

describe("connector server", () => {
  let keys: KubeletDir;
  let server: PluginServer;
  let base: string;
  const calls: string[] = [];
  const tmp = tempDir();
  const transports: Record<string, () => Transport> = {
    "Connect over HTTP/1.1": () => createConnectTransport({ baseUrl: base, httpVersion: "1.1" }),
    "Connect over h2c": () => createConnectTransport({ baseUrl: base, httpVersion: "2" }),
    "gRPC over h2c": () => createGrpcTransport({ baseUrl: base }),
  };

  before(async () => {
    keys = await jwksDir(tmp.dir, testIssuer, [keyA, keyB]);
    const verifier = new JWKSVerifier(tmp.dir, testInstance, testSubject);
    server = createConnectorServer(testConnector(calls), verifier);
    const addr = await server.listen(0, "127.0.0.1");
    base = `http://127.0.0.1:${addr.port}`;
  });
  after(async () => {
    await server.close(1000);
    tmp.cleanup();
  });

  for (const [name, transport] of Object.entries(transports)) {
    test(`Sync with the instance's token, ${name}`, async () => {
      const client = createClient(ConnectorService, transport());
      const token = await signToken(keyA);
      const res = await client.sync({ batchId: `b-${name}` }, bearer(token));
      assert.equal(res.delivery?.batchId, `b-${name}`);
      assert.equal(res.delivery?.watermark, "w-1");
      assert.ok(calls.includes(`sync b-${name}`));
    });
  }

  for (const name of ["Connect over h2c", "gRPC over h2c", "Connect over HTTP/1.1"]) {
    test(`ImportFile streams a file in chunks, ${name}`, async () => {
      const client = createClient(ConnectorService, transports[name]!());
      const token = await signToken(keyB);
      const res = await client.importFile(
        stream(header(`f-${name}`), chunk("2026-03-"), chunk("31")),
        bearer(token),
      );
      assert.equal(res.delivery?.batchId, `f-${name}`);
      assert.equal(res.delivery?.watermark, "2026-03-31");
      assert.ok(calls.includes(`import f-${name} statement.csv 10`));
    });
  }

  test("a plain error from the handler reaches the core as Unknown with its message, as in Go", async () => {
    const tmp2 = tempDir();
    await jwksDir(tmp2.dir, testIssuer, [keyA]);
    const failing = createConnectorServer(
      {
        async sync() {
          throw new Error("the bank answered 503");
        },
        async importFile() {
          throw new ConnectError("not a statement", Code.InvalidArgument);
        },
      },
      new JWKSVerifier(tmp2.dir, testInstance, testSubject),
    );
    const addr = await failing.listen(0, "127.0.0.1");
    try {
      const client = createClient(
        ConnectorService,
        createGrpcTransport({ baseUrl: `http://127.0.0.1:${addr.port}` }),
      );
      const token = await signToken(keyA);
      const plain = await refusedWith(client.sync({ batchId: "b" }, bearer(token)), Code.Unknown);
      assert.equal(plain.rawMessage, "the bank answered 503");
      const typed = await refusedWith(
        client.importFile(stream(header("f")), bearer(token)),
        Code.InvalidArgument,
      );
      assert.equal(typed.rawMessage, "not a statement");
    } finally {
      await failing.close(1000);
      tmp2.cleanup();
    }
  });

  test("ImportFile refuses a chunk before the header, a second header and no header", async () => {
    const client = createClient(ConnectorService, transports["gRPC over h2c"]!());
    const token = await signToken(keyA);
    for (const [msgs, want] of [
      [[chunk("x"), header("b")], "a chunk before the file header"],
      [[header("b"), header("b")], "a second file header"],
      [[], "no file header"],
      [[header("")], "file header: no batch_id"],
    ] as const) {
      const err = await refusedWith(
        client.importFile(stream(...msgs), bearer(token)),
        Code.InvalidArgument,
      );
      assert.equal(err.rawMessage, `ImportFile stream: ${want}`);
    }
  });

  test("ImportFile refuses a file over the connector's limit", async () => {
    const client = createClient(ConnectorService, transports["Connect over h2c"]!());
    const token = await signToken(keyA);
    const big = "x".repeat(FILE_LIMIT / 2 + 1);
    const err = await refusedWith(
      client.importFile(stream(header("b"), chunk(big), chunk(big)), bearer(token)),
      Code.ResourceExhausted,
    );
    assert.match(err.rawMessage, /file exceeds the connector's size limit of 1000 bytes/);
  });

  test("every call without the instance's token is refused before the handler runs", async () => {
    const before = calls.length;
    const client = createClient(ConnectorService, transports["Connect over HTTP/1.1"]!());
    const grpc = createClient(ConnectorService, transports["gRPC over h2c"]!());
    const refused: [string, string | undefined][] = [
      ["another instance's token", await signToken(keyA, { instance: "other" })],
      ["another subject's token", await signToken(keyA, { subject: "system:serviceaccount:x:y" })],
      ["another cluster's token", await signToken(keyA, { issuer: "https://other.example" })],
      ["an expired token", await signToken(keyA, { expiresIn: -3600 })],
      ["an unknown key's token", await signToken(newKey("rsa-a", "RS256"))],
      ["no token", undefined],
    ];
    for (const [name, token] of refused) {
      const opts = token === undefined ? {} : bearer(token);
      await refusedWith(client.sync({ batchId: name }, opts), Code.Unauthenticated);
      await refusedWith(grpc.sync({ batchId: name }, opts), Code.Unauthenticated);
      await refusedWith(
        grpc.importFile(stream(header(name), chunk("x")), opts),
        Code.Unauthenticated,
      );
    }
    assert.equal(calls.length, before, "a handler ran for a refused call");
  });

  test("a refusal is a bare 401 that says nothing of why", async () => {
    const token = await signToken(keyA, { instance: "other" });
    const res = await rawPost(base, { authorization: `Bearer ${token}` });
    assert.equal(res.status, 401);
    assert.equal(res.headers["www-authenticate"], 'Bearer realm="openfief-plugin"');
    assert.equal(res.body, "unauthenticated\n");
  });

  test("two Authorization headers are refused, even when one is valid", async () => {
    const token = await signToken(keyA);
    const res = await rawPost(base, { authorization: [`Bearer ${token}`, `Bearer ${token}`] });
    assert.equal(res.status, 401);
    const ok = await rawPost(base, { authorization: `bearer ${token}` });
    assert.equal(ok.status, 200, "the scheme is case-insensitive");
  });

  test("a rotated key counts from the next call, with no restart", async () => {
    const client = createClient(ConnectorService, transports["gRPC over h2c"]!());
    const oldToken = await signToken(keyA);
    const newKeyC: TestKey = newKey("rsa-c", "RS256");
    const newToken = await signToken(newKeyC);
    await client.sync({ batchId: "before" }, bearer(oldToken));
    await refusedWith(client.sync({ batchId: "early" }, bearer(newToken)), Code.Unauthenticated);
    await publishKeys(keys, testIssuer, [newKeyC, keyB]);
    await client.sync({ batchId: "after" }, bearer(newToken));
    await refusedWith(client.sync({ batchId: "retired" }, bearer(oldToken)), Code.Unauthenticated);
    await publishKeys(keys, testIssuer, [keyA, keyB]);
  });
});

/** A Connect unary Sync call made by hand, to see the raw HTTP answer. */
function rawPost(
  base: string,
  headers: Record<string, string | string[]>,
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${base}/openfief.connector.v1.ConnectorService/Sync`,
      { method: "POST", headers: { "content-type": "application/json", ...headers } },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on("error", reject);
    req.end(JSON.stringify({ batchId: "raw" }));
  });
}

describe("view server", () => {
  test("Export is served behind the token check", async () => {
    const tmp = tempDir();
    await jwksDir(tmp.dir, testIssuer, [keyA]);
    const pages: number[] = [];
    const server = createViewServer(
      {
        async export(req) {
          pages.push(req.entries.length);
          return {};
        },
      },
      new JWKSVerifier(tmp.dir, testInstance, testSubject),
    );
    const addr = await server.listen(0, "127.0.0.1");
    try {
      const client = createClient(
        ViewService,
        createGrpcTransport({ baseUrl: `http://127.0.0.1:${addr.port}` }),
      );
      const page = create(ExportRequestSchema, {
        runId: "r-1",
        dataTiers: ["ledger"],
        entries: [
          { sequence: 1n, source: "nbp-fx" },
          { sequence: 2n, source: "nbp-fx" },
        ],
      });
      await client.export(page, bearer(await signToken(keyA)));
      await refusedWith(
        client.export(page, bearer(await signToken(keyA, { instance: "other" }))),
        Code.Unauthenticated,
      );
      assert.deepEqual(pages, [2]);
    } finally {
      await server.close(1000);
      tmp.cleanup();
    }
  });

  test("a null verifier refuses every call", async () => {
    const server = createViewServer(
      {
        async export() {
          return {};
        },
      },
      null,
    );
    const addr = await server.listen(0, "127.0.0.1");
    try {
      const client = createClient(
        ViewService,
        createConnectTransport({ baseUrl: `http://127.0.0.1:${addr.port}`, httpVersion: "1.1" }),
      );
      await refusedWith(client.export({}, bearer(await signToken(keyA))), Code.Unauthenticated);
    } finally {
      await server.close(1000);
    }
  });
});

describe("idle connections", () => {
  test("an idle HTTP/2 session is closed, a quiet call in flight is not cut", async () => {
    const tmp = tempDir();
    await jwksDir(tmp.dir, testIssuer, [keyA]);
    const server = createConnectorServer(
      {
        async sync(req) {
          // Quiet for four idle timeouts: no byte moves on the connection.
          await new Promise((r) => setTimeout(r, 400));
          return { delivery: create(DeliverySchema, { batchId: req.batchId }) };
        },
      },
      new JWKSVerifier(tmp.dir, testInstance, testSubject),
      { idleTimeoutMs: 100 },
    );
    const sessions: ClientHttp2Session[] = [];
    const addr = await server.listen(0, "127.0.0.1");
    try {
      const client = createClient(
        ConnectorService,
        createGrpcTransport({ baseUrl: `http://127.0.0.1:${addr.port}` }),
      );
      const res = await client.sync({ batchId: "quiet" }, bearer(await signToken(keyA)));
      assert.equal(res.delivery?.batchId, "quiet");
      // A session that opens no stream is sent away after the idle timeout.
      const session = h2connect(`http://127.0.0.1:${addr.port}`);
      sessions.push(session);
      const [code] = (await once(session, "goaway")) as [number];
      assert.equal(code, 0);
    } finally {
      for (const s of sessions) s.destroy();
      await server.close(1000);
      tmp.cleanup();
    }
  });
});
