// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// The whole serving side, serveConnector, from the environment to the drain
// when it is told to stop, on a real port on loopback.

import assert from "node:assert/strict";
import { createServer, type AddressInfo } from "node:net";
import { describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { ConnectorService, DeliverySchema } from "../src/gen/openfief/connector/v1/connector_pb.js";
import { JWKSVerifier, createConnectorServer, serveConnector } from "../src/index.js";
import {
  bearer,
  jwksDir,
  newKey,
  refusedWith,
  signToken,
  tempDir,
  testIssuer,
  testInstance,
  testSubject,
} from "./helpers.js";

const keyA = newKey("rsa-a", "RS256");

/** A port nothing listens on right now. */
async function freePort(): Promise<number> {
  const s = createServer();
  s.listen(0, "127.0.0.1");
  await new Promise((r) => s.once("listening", r));
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

describe("serveConnector", () => {
  test("serves from the environment, then drains the call in flight when stopped", async () => {
    const tmp = tempDir();
    await jwksDir(tmp.dir, testIssuer, [keyA]);
    const port = await freePort();
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let entered!: () => void;
    const inFlight = new Promise<void>((r) => (entered = r));
    const ac = new AbortController();
    const served = serveConnector(
      {
        async sync(req) {
          entered();
          await released;
          return { delivery: create(DeliverySchema, { batchId: req.batchId }) };
        },
      },
      {
        signal: ac.signal,
        env: {
          OPENFIEF_LISTEN_PORT: String(port),
          OPENFIEF_INSTANCE: testInstance,
          OPENFIEF_CORE_SUBJECT: testSubject,
          OPENFIEF_SA_JWKS_DIR: tmp.dir,
        },
      },
    );
    try {
      const base = `http://127.0.0.1:${port}`;
      const client = createClient(ConnectorService, createGrpcTransport({ baseUrl: base }));
      const token = await signToken(keyA);
      let call: Promise<unknown> | undefined;
      // serveConnector listens asynchronously: retry until the port answers.
      for (let i = 0; ; i++) {
        const attempt = client.sync({ batchId: "slow" }, bearer(token));
        const first = await Promise.race([
          inFlight.then(() => "entered"),
          attempt.then(
            () => "done",
            () => "failed",
          ),
        ]);
        if (first === "entered") {
          call = attempt;
          break;
        }
        if (i > 200) assert.fail("the server never answered");
        await new Promise((r) => setTimeout(r, 10));
      }
      ac.abort();
      // A new connection is refused while the call in flight may finish.
      const fresh = createClient(
        ConnectorService,
        createConnectTransport({ baseUrl: base, httpVersion: "1.1" }),
      );
      await refusedWith(fresh.sync({ batchId: "late" }, bearer(token)), Code.Unavailable);
      release();
      const res = (await call) as { delivery?: { batchId: string } };
      assert.equal(res.delivery?.batchId, "slow");
      await served;
    } finally {
      release();
      ac.abort();
      await served.catch(() => {});
      tmp.cleanup();
    }
  });

  test("cuts a call that outlives the drain and says so", async () => {
    const tmp = tempDir();
    await jwksDir(tmp.dir, testIssuer, [keyA]);
    let entered!: () => void;
    const inFlight = new Promise<void>((r) => (entered = r));
    const server = createConnectorServer(
      {
        sync: () => {
          entered();
          return new Promise(() => {});
        },
      },
      new JWKSVerifier(tmp.dir, testInstance, testSubject),
    );
    const addr = await server.listen(0, "127.0.0.1");
    try {
      const client = createClient(
        ConnectorService,
        createGrpcTransport({ baseUrl: `http://127.0.0.1:${addr.port}` }),
      );
      const call = client.sync({ batchId: "stuck" }, bearer(await signToken(keyA))).then(
        () => "ok",
        (e: unknown) => Code[ConnectError.from(e).code],
      );
      await inFlight;
      await assert.rejects(server.close(200), /drain calls in flight: not done after 200 ms/);
      assert.notEqual(await call, "ok");
    } finally {
      tmp.cleanup();
    }
  });
});
