// The connector called through the SDK's server, as the core calls it.

import assert from "node:assert/strict";
import { test } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { createConnectorServer, type CoreVerifier } from "@openfief/sdk";
import { ConnectorService } from "@openfief/sdk/connector/v1";
import { validate } from "@openfief/sdk/delivery";
import { connector, parseConfig } from "../src/plugin.js";

/** Stands in for the core's token check: only the test's token passes. */
const verifier: CoreVerifier = {
  verify: (token) =>
    token === "core" ? Promise.resolve() : Promise.reject(new Error("not the test token")),
};

test("sync answers a delivery by the contract's rules", async () => {
  const server = createConnectorServer(connector(parseConfig({})), verifier);
  const addr = await server.listen(0, "127.0.0.1");
  try {
    const client = createClient(
      ConnectorService,
      createConnectTransport({ baseUrl: `http://127.0.0.1:${addr.port}`, httpVersion: "1.1" }),
    );
    const res = await client.sync(
      { batchId: "batch-1" },
      { headers: { authorization: "Bearer core" } },
    );
    assert.ok(res.delivery);
    assert.deepEqual(validate(res.delivery), []);
    assert.equal(res.delivery.batchId, "batch-1");
    assert.equal(res.delivery.fxRates.length, 1);

    // A call without the core's token never reaches the connector.
    await assert.rejects(
      client.sync({ batchId: "batch-2" }),
      (e) => ConnectError.from(e).code === Code.Unauthenticated,
    );
  } finally {
    await server.close(1000);
  }
});

test("config refusals", () => {
  for (const bad of ["usd", "EUR", 7]) {
    assert.throws(() => parseConfig({ quoteCurrency: bad }), /quoteCurrency/);
  }
});
