// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import assert from "node:assert/strict";
import { test } from "node:test";
import { coreURL, listenPort, loadConfig } from "../src/index.js";

test("coreURL takes an IP literal and a port, never a name", () => {
  const good: Record<string, string> = {
    "10.96.0.10:8080": "http://10.96.0.10:8080/",
    "[fd00::10]:8081": "http://[fd00::10]:8081/",
  };
  for (const [addr, want] of Object.entries(good)) {
    assert.equal(coreURL({ OPENFIEF_CORE_ADDRESS: addr }).href, want);
  }
  const bad: Record<string, RegExp> = {
    "": /OPENFIEF_CORE_ADDRESS: not set/,
    "openfief-core:8080": /host must be an IP address/,
    "10.96.0.10": /is not <ip>:<port>/,
    "10.96.0.10:0": /not a number from 1 to 65535/,
    "10.96.0.10:080": /not a number from 1 to 65535/,
    "10.96.0.10:65536": /not a number from 1 to 65535/,
    "fd00::10:80": /is not <ip>:<port>/,
    "[fe80::1%eth0]:80": /host must be an IP address/,
  };
  for (const [addr, want] of Object.entries(bad)) {
    assert.throws(() => coreURL({ OPENFIEF_CORE_ADDRESS: addr }), want, addr);
  }
});

test("listenPort defaults to 8080 and refuses what is not a port", () => {
  assert.equal(listenPort({}), 8080);
  assert.equal(listenPort({ OPENFIEF_LISTEN_PORT: "9443" }), 9443);
  for (const p of ["0", "-1", "+80", "08080", "65536", "80a", " 80"]) {
    assert.throws(() => listenPort({ OPENFIEF_LISTEN_PORT: p }), /OPENFIEF_LISTEN_PORT: port/, p);
  }
});

test("loadConfig reads the instance's config, {} when unset", () => {
  assert.deepEqual(loadConfig({}), {});
  assert.deepEqual(loadConfig({ OPENFIEF_CONFIG: " \n" }), {});
  assert.deepEqual(loadConfig({ OPENFIEF_CONFIG: '{"accounts":{"1234":"ledger:cash"}}' }), {
    accounts: { "1234": "ledger:cash" },
  });
  assert.throws(() => loadConfig({ OPENFIEF_CONFIG: "{} x" }), /OPENFIEF_CONFIG: /);
});
