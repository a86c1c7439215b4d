// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// The verifier with its key files on a real file system, laid out as the
// kubelet lays out projected volumes, and mutated tokens from fixed seeds
// (Node has no fuzzing engine: these stand in for the Go SDK's fuzz target),
// so a failure replays. The shared token vectors are in conformance.test.ts.

import assert from "node:assert/strict";
import { symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import {
  ISSUER_FILE_NAME,
  JWKS_FILE_NAME,
  JWKSVerifier,
  TokenRefusedError,
  newCoreVerifier,
} from "../src/index.js";
import { verifyPaths } from "../bench/paths.js";
import {
  jwksDir,
  mutate,
  newKey,
  publicJWK,
  rng,
  signToken,
  tempDir,
  testIssuer,
  testInstance,
  testSubject,
} from "./helpers.js";

test("the verifier fails closed when its files are missing, escape or are not keys", async (t) => {
  const key = newKey("rsa-a", "RS256");
  const token = await signToken(key);
  const jwks = JSON.stringify({ keys: [await publicJWK(key)] });
  const outside = tempDir();
  t.after(outside.cleanup);
  writeFileSync(join(outside.dir, "jwks.json"), jwks);
  const cases: Record<string, (dir: string) => void> = {
    "no files": () => {},
    "no issuer": (dir) => writeFileSync(join(dir, JWKS_FILE_NAME), jwks),
    "keys linked from outside the directory": (dir) => {
      writeFileSync(join(dir, ISSUER_FILE_NAME), testIssuer);
      symlinkSync(join(outside.dir, "jwks.json"), join(dir, JWKS_FILE_NAME));
    },
    "keys not JSON": (dir) => {
      writeFileSync(join(dir, ISSUER_FILE_NAME), testIssuer);
      writeFileSync(join(dir, JWKS_FILE_NAME), "{");
    },
    "keys over a mebibyte": (dir) => {
      writeFileSync(join(dir, ISSUER_FILE_NAME), testIssuer);
      writeFileSync(join(dir, JWKS_FILE_NAME), jwks + " ".repeat(1 << 20));
    },
  };
  for (const [name, setup] of Object.entries(cases)) {
    const tmp = tempDir();
    t.after(tmp.cleanup);
    setup(tmp.dir);
    const v = new JWKSVerifier(tmp.dir, testInstance, testSubject);
    await assert.rejects(v.verify(token), (e: unknown) => {
      assert.ok(e instanceof TokenRefusedError, name);
      assert.equal(e.reason, "keys", name);
      return true;
    });
  }
  // The same files in place are accepted: the cases above fail for their
  // one difference.
  const ok = tempDir();
  t.after(ok.cleanup);
  await jwksDir(ok.dir, testIssuer, [key]);
  await new JWKSVerifier(ok.dir, testInstance, testSubject).verify(token);
});

test("newCoreVerifier reads the operator's environment", async (t) => {
  const tmp = tempDir();
  t.after(tmp.cleanup);
  const key = newKey("ec-1", "ES256");
  await jwksDir(tmp.dir, testIssuer, [key]);
  const v = newCoreVerifier({
    OPENFIEF_SA_JWKS_DIR: tmp.dir,
    OPENFIEF_INSTANCE: testInstance,
    OPENFIEF_CORE_SUBJECT: testSubject,
  });
  await v.verify(await signToken(key));
  await assert.rejects(
    v.verify(await signToken(key, { instance: "ibkr-flex" })),
    /invalid audience/,
  );
  assert.throws(
    () => newCoreVerifier({ OPENFIEF_CORE_SUBJECT: testSubject }),
    /no instance name \(OPENFIEF_INSTANCE\)/,
  );
  assert.throws(
    () => newCoreVerifier({ OPENFIEF_INSTANCE: testInstance }),
    /no core subject \(OPENFIEF_CORE_SUBJECT\)/,
  );
});

test("mutated tokens are refused, with a TokenRefusedError only", async (t) => {
  const tmp = tempDir();
  t.after(tmp.cleanup);
  const key = newKey("ec-1", "ES256");
  writeFileSync(join(tmp.dir, JWKS_FILE_NAME), JSON.stringify({ keys: [await publicJWK(key)] }));
  writeFileSync(join(tmp.dir, ISSUER_FILE_NAME), testIssuer);
  const v = new JWKSVerifier(tmp.dir, testInstance, testSubject);
  const valid = await signToken(key);
  await v.verify(valid);
  const next = rng(7);
  const alphabet = 'ABCxyz019-_.=+/ \n\u00e9{}"';
  for (let i = 0; i < 1500; i++) {
    const token = mutate(valid, next, alphabet);
    if (token === valid) continue;
    try {
      await v.verify(token);
    } catch (e) {
      assert.ok(e instanceof TokenRefusedError, `${JSON.stringify(token)}: ${String(e)}`);
      continue;
    }
    // Only a change base64url decoding ignores (the spare bits of the last
    // character of the signature) may leave the token acceptable.
    const [h, p, s] = token.split(".");
    const [vh, vp, vs] = valid.split(".");
    assert.ok(
      h === vh && p === vp && s !== undefined && vs !== undefined,
      `accepted ${JSON.stringify(token)}`,
    );
    assert.deepEqual(
      Buffer.from(s, "base64url"),
      Buffer.from(vs, "base64url"),
      `accepted ${JSON.stringify(token)}`,
    );
  }
});

test("the benchmark's SDK and bare jose paths accept and refuse the same tokens", async (t) => {
  for (const alg of ["RS256", "ES256"] as const) {
    const p = await verifyPaths(alg);
    t.after(p.cleanup);
    const [h, body, sig] = p.token.split(".") as [string, string, string];
    const claims = JSON.parse(Buffer.from(body, "base64url").toString("utf8")) as Record<
      string,
      unknown
    >;
    const reencoded = (c: Record<string, unknown>) =>
      `${h}.${Buffer.from(JSON.stringify(c)).toString("base64url")}.${sig}`;
    const last = sig.at(-2) === "A" ? "B" : "A";
    const tokens: Record<string, { token: string; ok: boolean }> = {
      valid: { token: p.token, ok: true },
      "the other valid token": { token: p.otherToken, ok: true },
      "signature changed": {
        token: `${h}.${body}.${sig.slice(0, -2)}${last}${sig.at(-1)}`,
        ok: false,
      },
      "audience changed, not signed again": {
        token: reencoded({ ...claims, aud: ["openfief-plugin:other"] }),
        ok: false,
      },
      "expiry moved, not signed again": {
        token: reencoded({ ...claims, exp: (claims["exp"] as number) + 3600 }),
        ok: false,
      },
      "another instance": { token: await signToken(p.key, { instance: "other" }), ok: false },
      "another issuer": { token: await signToken(p.key, { issuer: "https://evil" }), ok: false },
      "another subject": {
        token: await signToken(p.key, { subject: "system:anonymous" }),
        ok: false,
      },
      expired: { token: await signToken(p.key, { expiresIn: -120 }), ok: false },
      "expired within the leeway": { token: await signToken(p.key, { expiresIn: -30 }), ok: true },
      "signed by another key": { token: await signToken({ ...newKey(p.key.kid, alg) }), ok: false },
    };
    for (const [name, { token, ok }] of Object.entries(tokens)) {
      for (const [path, check] of Object.entries({
        sdk: p.sdk,
        jose: p.jose,
        joseJWKS: p.joseJWKS,
      })) {
        const accepted = await check(token).then(
          () => true,
          () => false,
        );
        assert.equal(accepted, ok, `${alg}, ${name}: ${path} ${accepted ? "accepted" : "refused"}`);
      }
    }
  }
});
