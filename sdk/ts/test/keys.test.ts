// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// The key set parser on mutated key sets from a fixed seed (Node has no
// fuzzing engine: this stands in for the Go SDK's fuzz target), so a
// failure replays.

import assert from "node:assert/strict";
import { test } from "node:test";
import { parseSigningKeys } from "../src/keys.js";
import { mutate, newKey, publicJWK, rng } from "./helpers.js";

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
