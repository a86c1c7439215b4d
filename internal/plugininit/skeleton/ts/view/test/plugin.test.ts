// The view called through the SDK's server, as the core calls it.

import assert from "node:assert/strict";
import { test } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { createViewServer, type CoreVerifier } from "@openfief/sdk";
import { ViewService } from "@openfief/sdk/view/v1";
import { parseConfig, view } from "../src/plugin.js";

/** Stands in for the core's token check: only the test's token passes. */
const verifier: CoreVerifier = {
  verify: (token) =>
    token === "core" ? Promise.resolve() : Promise.reject(new Error("not the test token")),
};

test("a page sent twice is kept once", async () => {
  const lines: string[] = [];
  const server = createViewServer(
    view(parseConfig({}), (l) => lines.push(l)),
    verifier,
  );
  const addr = await server.listen(0, "127.0.0.1");
  try {
    const client = createClient(
      ViewService,
      createConnectTransport({ baseUrl: `http://127.0.0.1:${addr.port}`, httpVersion: "1.1" }),
    );
    const page = {
      runId: "run-1",
      entries: [
        {
          sequence: 1n,
          source: "example-connector",
          institution: { id: "example-bank", name: "Example Bank" },
          entry: {
            case: "fxRate" as const,
            value: {
              date: "2026-01-02",
              baseCurrency: "EUR",
              quoteCurrency: "USD",
              rate: "1.0350",
            },
          },
        },
      ],
    };
    const headers = { authorization: "Bearer core" };
    await client.export(page, { headers });
    await client.export(page, { headers });
    assert.deepEqual(lines, [
      "export: kept 1 entries, skipped 0 already kept",
      "export: kept 0 entries, skipped 1 already kept",
    ]);

    // A call without the core's token never reaches the view.
    await assert.rejects(
      client.export(page),
      (e) => ConnectError.from(e).code === Code.Unauthenticated,
    );
    assert.equal(lines.length, 2);
  } finally {
    await server.close(1000);
  }
});
