// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import assert from "node:assert/strict";
import { test } from "node:test";
import { NotDecimalError, isDecimal, parseDecimal, parseNumber } from "../../src/delivery/index.js";
import { rng } from "../helpers.js";

test("decimal parsers on random input: refuse, or keep the exact value", () => {
  const next = rng(20260331);
  const alphabet = "0123456789.-+eE ,x٣";
  for (let i = 0; i < 20000; i++) {
    const n = Math.floor(next() * 12);
    let s = "";
    for (let j = 0; j < n; j++) s += alphabet[Math.floor(next() * alphabet.length)];
    for (const parse of [parseDecimal, parseNumber]) {
      let out: string;
      try {
        out = parse(s).toString();
      } catch (e) {
        assert.ok(
          e instanceof NotDecimalError,
          `${parse.name}(${JSON.stringify(s)}) threw ${String(e)}`,
        );
        continue;
      }
      assert.ok(isDecimal(out), `${parse.name}(${JSON.stringify(s)}) printed ${out}`);
      // The value is kept: it compares equal to what a second parse gives.
      assert.equal(parseDecimal(out).cmp(parse(s)), 0);
      if (parse === parseDecimal) assert.ok(Number(out) === Number(s), s);
    }
  }
});
