// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// Randomised tests of the parsers of outside input, from fixed seeds so a
// failure replays: Node has no fuzzing engine, so these stand in for the Go
// SDK's fuzz targets.

import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ISSUER_FILE_NAME, JWKS_FILE_NAME, JWKSVerifier, TokenRefusedError } from "../src/index.js";
import { objectsWithDuplicateMembers } from "../src/jsondup.js";
import { parseSigningKeys } from "../src/keys.js";
import {
  newKey,
  publicJWK,
  signToken,
  tempDir,
  testIssuer,
  testInstance,
  testSubject,
} from "./helpers.js";

/** A small deterministic generator (xorshift). */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

/** Replaces, inserts or deletes a few characters of s. */
function mutate(s: string, next: () => number, alphabet: string): string {
  let out = s;
  const n = 1 + Math.floor(next() * 3);
  for (let i = 0; i < n; i++) {
    const at = Math.floor(next() * (out.length + 1));
    const c = alphabet[Math.floor(next() * alphabet.length)] ?? "";
    const op = next();
    if (op < 0.4) out = out.slice(0, at) + c + out.slice(at + 1);
    else if (op < 0.7) out = out.slice(0, at) + c + out.slice(at);
    else out = out.slice(0, at) + out.slice(at + 1);
  }
  return out;
}

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

/** Random JSON text with objects that sometimes repeat a member, and where. */
function randomJSON(next: () => number, depth: number, path: string, dups: Set<string>): string {
  const r = next();
  if (depth > 3 || r < 0.3) {
    return (
      ["1", "-2.5e3", "true", "null", '"s"', '"a\\"b"', '"\\u00e9"'][Math.floor(next() * 7)] ?? "0"
    );
  }
  if (r < 0.6) {
    const n = Math.floor(next() * 4);
    const items = Array.from({ length: n }, (_, i) =>
      randomJSON(next, depth + 1, `${path}/${i}`, dups),
    );
    return ` [ ${items.join(" ,\n")} ] `;
  }
  const names = ["a", "b", "a/b", "~", "\\u0061"];
  const n = Math.floor(next() * 4);
  const seen = new Set<string>();
  const members: string[] = [];
  for (let i = 0; i < n; i++) {
    const raw = names[Math.floor(next() * names.length)] ?? "a";
    const name = JSON.parse(`"${raw}"`) as string;
    if (seen.has(name)) dups.add(path);
    seen.add(name);
    const child = `${path}/${name.replace(/~/g, "~0").replace(/\//g, "~1")}`;
    members.push(`"${raw}" :${randomJSON(next, depth + 1, child, dups)}`);
  }
  return `{${members.join(",")}}`;
}

test("repeated members are found where they are, in any JSON", () => {
  const next = rng(11);
  for (let i = 0; i < 5000; i++) {
    const dups = new Set<string>();
    const text = randomJSON(next, 0, "", dups);
    JSON.parse(text);
    const found = objectsWithDuplicateMembers(text);
    // A path can be reached twice when a repeated member holds an object:
    // every real repetition is found, and nothing is found that is not one
    // or does not sit under one.
    for (const d of dups) assert.ok(found.has(d), `${text}: ${d} not found`);
    for (const f of found) {
      assert.ok(dups.has(f) || [...dups].some((d) => f.startsWith(d + "/")), `${text}: ${f}`);
    }
  }
});

test("random key sets never throw anything but a plain error, and keep only valid keys", async () => {
  const next = rng(13);
  const good = JSON.stringify({ keys: [await publicJWK(newKey("rsa-1", "RS256"))] });
  const alphabet = '{}[]",:0aAkty-_ \\';
  for (let i = 0; i < 2000; i++) {
    const text = mutate(good, next, alphabet);
    try {
      const keys = parseSigningKeys(Buffer.from(text), "jwks.json");
      for (const [kid, k] of keys) {
        assert.ok(kid !== "");
        assert.ok(["RS256", "ES256", "ES384", "ES512"].includes(k.alg));
        assert.equal(k.key.type, "public");
      }
    } catch (e) {
      assert.ok(
        e instanceof Error && !(e instanceof TypeError) && !(e instanceof RangeError),
        String(e),
      );
    }
  }
});
