// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// The shared conformance vectors in sdk/testdata/conformance, which the Go
// SDK's tests read too: both SDKs must give every vector the same verdict.

import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { equals, fromJson, type JsonValue } from "@bufbuild/protobuf";
import {
  DeliverySchema,
  TransactionSchema,
} from "../src/gen/openfief/connector/v1/connector_pb.js";
import {
  ISSUER_FILE_NAME,
  JWKS_FILE_NAME,
  JWKSVerifier,
  TokenRefusedError,
  coreURL,
  listenPort,
} from "../src/index.js";
import { parseProxyURL } from "../src/egress.js";
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
} from "../src/delivery/index.js";
import { conformanceDir, tempDir } from "./helpers.js";

function read<T>(name: string): T {
  return JSON.parse(readFileSync(join(conformanceDir, name), "utf8")) as T;
}

interface TokenVectors {
  instance: string;
  subject: string;
  now: number;
  key_sets: Record<string, { jwks: string; issuer: string }>;
  vectors: { name: string; key_set: string; token: string; expect: string; reason?: string }[];
}

describe("token vectors", () => {
  const f = read<TokenVectors>("tokens.json");
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

interface DecimalVectors {
  parse_decimal: { in: string; out: string | null }[];
  parse_number: { in: string; out: string | null }[];
  arithmetic: { a: string; op: string; b: string; want: string }[];
  compare: { a: string; b: string; want: number }[];
}

describe("decimal vectors", () => {
  const f = read<DecimalVectors>("decimals.json");
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
  const f = read<{
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
  const f = read<DeliveryVectors>("deliveries.json");
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

interface EnvironmentVectors {
  core_address: { in: string; valid: boolean }[];
  listen_port: { in: string; port: number | null }[];
  proxy_url: { in: string; out: string | null }[];
}

describe("environment vectors", () => {
  const f = read<EnvironmentVectors>("environment.json");
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
