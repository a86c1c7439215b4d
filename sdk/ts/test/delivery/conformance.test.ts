// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// The shared conformance vectors of the delivery helpers in
// sdk/testdata/conformance, which the Go SDK's tests read too: both SDKs
// must give every vector the same verdict.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { equals, fromJson, type JsonValue } from "@bufbuild/protobuf";
import {
  DeliverySchema,
  TransactionSchema,
} from "../../src/gen/openfief/connector/v1/connector_pb.js";
import {
  NotDecimalError,
  imbalance,
  isCurrency,
  isDate,
  isDecimal,
  mustDecimal,
  parseDecimal,
  parseNumber,
  sortDelivery,
  validate,
} from "../../src/delivery/index.js";
import { readVectors } from "../helpers.js";

interface DecimalVectors {
  parse_decimal: { in: string; out: string | null }[];
  parse_number: { in: string; out: string | null }[];
  arithmetic: { a: string; op: string; b: string; want: string }[];
  compare: { a: string; b: string; want: number }[];
}

describe("decimal vectors", () => {
  const f = readVectors<DecimalVectors>("decimals.json");
  test("parseDecimal and isDecimal", () => {
    assert.ok(f.parse_decimal.length > 0);
    for (const v of f.parse_decimal) {
      assert.equal(isDecimal(v.in), v.out !== null, `isDecimal(${JSON.stringify(v.in)})`);
      if (v.out === null) {
        assert.throws(
          () => parseDecimal(v.in),
          NotDecimalError,
          `parseDecimal(${JSON.stringify(v.in)})`,
        );
      } else {
        assert.equal(parseDecimal(v.in).toString(), v.out, `parseDecimal(${JSON.stringify(v.in)})`);
      }
    }
  });
  test("parseNumber", () => {
    assert.ok(f.parse_number.length > 0);
    for (const v of f.parse_number) {
      if (v.out === null) {
        assert.throws(
          () => parseNumber(v.in),
          NotDecimalError,
          `parseNumber(${JSON.stringify(v.in)})`,
        );
      } else {
        assert.equal(parseNumber(v.in).toString(), v.out, `parseNumber(${JSON.stringify(v.in)})`);
      }
    }
  });
  test("arithmetic", () => {
    assert.ok(f.arithmetic.length > 0);
    for (const v of f.arithmetic) {
      const a = mustDecimal(v.a);
      const b = mustDecimal(v.b);
      const got =
        v.op === "+" ? a.add(b) : v.op === "-" ? a.sub(b) : v.op === "*" ? a.mul(b) : undefined;
      assert.ok(got, `unknown op ${v.op}`);
      assert.equal(got.toString(), v.want, `${v.a} ${v.op} ${v.b}`);
    }
  });
  test("compare", () => {
    assert.ok(f.compare.length > 0);
    for (const v of f.compare) {
      assert.equal(mustDecimal(v.a).cmp(mustDecimal(v.b)), v.want, `cmp(${v.a}, ${v.b})`);
    }
  });
});

describe("field vectors", () => {
  const f = readVectors<{
    dates: { in: string; valid: boolean }[];
    currencies: { in: string; valid: boolean }[];
  }>("fields.json");
  test("dates", () => {
    assert.ok(f.dates.length > 0);
    for (const v of f.dates) assert.equal(isDate(v.in), v.valid, `isDate(${JSON.stringify(v.in)})`);
  });
  test("currencies", () => {
    assert.ok(f.currencies.length > 0);
    for (const v of f.currencies)
      assert.equal(isCurrency(v.in), v.valid, `isCurrency(${JSON.stringify(v.in)})`);
  });
});

interface DeliveryVectors {
  validate: { name: string; delivery: JsonValue; errors: { field: string; rule: string }[] }[];
  imbalance: { name: string; transaction: JsonValue; off: string[] }[];
  sort: { name: string; delivery: JsonValue; sorted: JsonValue }[];
}

describe("delivery vectors", () => {
  const f = readVectors<DeliveryVectors>("deliveries.json");
  test("has vectors", () => {
    assert.ok(f.validate.length > 0 && f.imbalance.length > 0 && f.sort.length > 0);
  });
  for (const v of f.validate) {
    test(`validate: ${v.name}`, () => {
      const got = validate(fromJson(DeliverySchema, v.delivery)).map((e) => ({
        field: e.field,
        rule: e.rule,
      }));
      assert.deepEqual(got, v.errors);
    });
  }
  for (const v of f.imbalance) {
    test(`imbalance: ${v.name}`, () => {
      assert.deepEqual(imbalance(fromJson(TransactionSchema, v.transaction)), v.off);
    });
  }
  for (const v of f.sort) {
    test(`sort: ${v.name}`, () => {
      const d = fromJson(DeliverySchema, v.delivery);
      const want = fromJson(DeliverySchema, v.sorted);
      assert.ok(!equals(DeliverySchema, d, want), "the vector is sorted already");
      sortDelivery(d);
      assert.ok(equals(DeliverySchema, d, want), "sorted differently");
    });
  }
});
