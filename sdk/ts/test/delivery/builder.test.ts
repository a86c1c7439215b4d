// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import assert from "node:assert/strict";
import { test } from "node:test";
import { Severity } from "../../src/gen/openfief/connector/v1/connector_pb.js";
import {
  DeliveryBuilder,
  DeliveryInvalidError,
  PROBLEM_UNBALANCED,
  date,
} from "../../src/delivery/index.js";

const nbp = { id: "nbp", name: "Narodowy Bank Polski" };
const cash = (accountId: string, amount: string, currency: string) => ({
  accountId,
  amount,
  currency,
});

test("the builder reports unbalanced transactions, sorts and keeps the warnings in order", () => {
  const d = new DeliveryBuilder("b-1", nbp)
    .transaction({
      sourceId: "off",
      date: "2026-03-02",
      postings: [cash("a", "10.00", "USD"), cash("b", "-9.99", "USD"), cash("c", "5", "EUR")],
    })
    .transaction({
      sourceId: "ok",
      date: "2026-03-01",
      postings: [cash("a", "0.1", "PLN"), cash("a", "0.2", "PLN"), cash("b", "-0.3", "PLN")],
    })
    .warn("rounded", "line 3", "amount 1.005 rounded")
    .build("2026-03-02");
  assert.equal(d.watermark, "2026-03-02");
  assert.deepEqual(
    d.transactions.map((t) => t.sourceId),
    ["ok", "off"],
  );
  assert.deepEqual(
    d.problems.map((p) => [Severity[p.severity], p.code, p.sourceId, p.location, p.message]),
    [
      ["WARNING", "rounded", "", "line 3", "amount 1.005 rounded"],
      ["ERROR", PROBLEM_UNBALANCED, "off", "", "postings do not balance: 5 EUR, 0.01 USD"],
    ],
  );
});

test("the builder refuses an invalid delivery, naming every field", () => {
  const b = new DeliveryBuilder("", nbp)
    .fxRate({ date: "2026-03-01", baseCurrency: "EUR", quoteCurrency: "PLN", rate: "4,28" })
    .price({ instrument: { symbol: "VWCE" }, date: "2026-03-01", price: "117.5", currency: "EUR" });
  assert.throws(
    () => b.build(""),
    (e: unknown) => {
      assert.ok(e instanceof DeliveryInvalidError);
      assert.deepEqual(
        e.errors.map((x) => `${x.field} ${x.rule}`),
        ["batch_id required", "fx_rates[0].rate not_decimal"],
      );
      assert.equal(e.message, "batch_id: required\nfx_rates[0].rate: not a decimal");
      return true;
    },
  );
  assert.throws(() => b.build(""), /build was already called/);
});

test("date writes the UTC calendar date", () => {
  assert.equal(date(new Date("2026-03-31T23:30:00-02:00")), "2026-04-01");
  assert.throws(() => date(new Date(Date.UTC(10000, 0, 1))), RangeError);
});
