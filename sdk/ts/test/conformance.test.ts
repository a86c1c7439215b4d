// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// The shared conformance vectors in sdk/testdata/conformance, which the Go
// SDK's tests read too: both SDKs must give every vector the same verdict.

import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import {
  ISSUER_FILE_NAME,
  JWKS_FILE_NAME,
  JWKSVerifier,
  TokenRefusedError,
  coreURL,
  listenPort,
} from "../src/index.js";
import { parseProxyURL } from "../src/egress.js";
import { readVectors, tempDir } from "./helpers.js";

interface TokenVectors {
  instance: string;
  subject: string;
  now: number;
  key_sets: Record<string, { jwks: string; issuer: string }>;
  vectors: { name: string; key_set: string; token: string; expect: string; reason?: string }[];
}

describe("token vectors", () => {
  const f = readVectors<TokenVectors>("tokens.json");
  const tmp = tempDir();
  after(tmp.cleanup);
  const dirs = new Map<string, string>();
  for (const [name, ks] of Object.entries(f.key_sets)) {
    const dir = join(tmp.dir, name);
    mkdirSync(dir);
    writeFileSync(join(dir, JWKS_FILE_NAME), ks.jwks);
    writeFileSync(join(dir, ISSUER_FILE_NAME), ks.issuer);
    dirs.set(name, dir);
  }
  test("has vectors", () => assert.ok(f.vectors.length > 50));
  for (const v of f.vectors) {
    test(v.name, async () => {
      const dir = dirs.get(v.key_set);
      assert.ok(dir, `no key set ${v.key_set}`);
      const verifier = new JWKSVerifier(dir, f.instance, f.subject, { now: () => f.now * 1000 });
      let got = "accept";
      let reason: string | undefined;
      try {
        await verifier.verify(v.token);
      } catch (e) {
        assert.ok(e instanceof TokenRefusedError, `not a TokenRefusedError: ${String(e)}`);
        got = "refuse";
        reason = e.reason;
        for (const part of v.token.split(".")) {
          if (part.length >= 8) assert.ok(!e.message.includes(part), "the error quotes the token");
        }
      }
      assert.deepEqual({ got, reason }, { got: v.expect, reason: v.reason });
    });
  }
});

interface EnvironmentVectors {
  core_address: { in: string; valid: boolean }[];
  listen_port: { in: string; port: number | null }[];
  proxy_url: { in: string; out: string | null }[];
}

describe("environment vectors", () => {
  const f = readVectors<EnvironmentVectors>("environment.json");
  test("core addresses", () => {
    assert.ok(f.core_address.length > 0);
    for (const v of f.core_address) {
      let valid = true;
      try {
        coreURL({ OPENFIEF_CORE_ADDRESS: v.in });
      } catch {
        valid = false;
      }
      assert.equal(valid, v.valid, `core address ${JSON.stringify(v.in)}`);
    }
  });
  test("listen ports", () => {
    assert.ok(f.listen_port.length > 0);
    for (const v of f.listen_port) {
      if (v.port === null) {
        assert.throws(
          () => listenPort({ OPENFIEF_LISTEN_PORT: v.in }),
          Error,
          JSON.stringify(v.in),
        );
      } else {
        assert.equal(listenPort({ OPENFIEF_LISTEN_PORT: v.in }), v.port);
      }
    }
  });
  test("proxy URLs", () => {
    assert.ok(f.proxy_url.length > 0);
    for (const v of f.proxy_url) {
      if (v.out === null) {
        assert.throws(() => parseProxyURL(v.in), Error, JSON.stringify(v.in));
      } else {
        // The Go SDK prints a URL without a path, the WHATWG URL with "/".
        assert.equal(parseProxyURL(v.in).href.replace(/\/$/, ""), v.out, JSON.stringify(v.in));
      }
    }
  });
});
