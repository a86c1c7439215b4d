// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import type { Delivery, Instrument } from "../gen/openfief/connector/v1/connector_pb.js";

/**
 * Compares two strings by code point, the order of their UTF-8 bytes, as the
 * Go SDK does. UTF-16 code units order the same except where a character
 * above U+FFFF (a surrogate pair) meets one from U+E000 to U+FFFF.
 */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs !== ys && (xs ? y : x) >= 0xe000) return xs ? 1 : -1;
    return x < y ? -1 : 1;
  }
  return a.length < b.length ? -1 : a.length > b.length ? 1 : 0;
}

const compare = compareCodePoints;

/** Returns the first non-zero comparison, or 0. */
function or(...results: number[]): number {
  for (const r of results) if (r !== 0) return r;
  return 0;
}

function compareInstruments(a: Instrument | undefined, b: Instrument | undefined): number {
  return or(
    compare(a?.isin ?? "", b?.isin ?? ""),
    compare(a?.symbol ?? "", b?.symbol ?? ""),
    compare(a?.exchange ?? "", b?.exchange ?? ""),
  );
}

/**
 * Puts d's lists in a fixed order, in place, so the same report always gives
 * the same Delivery whatever order a connector found things in: transactions
 * by date and source ID; balance assertions by date, account, currency and
 * instrument; prices by date, instrument and currency; FX rates by date and
 * currency pair; index readings by index and date. Postings keep their order
 * within a transaction, and problems the order they were reported in. Ties
 * keep their order (Array.prototype.sort is stable).
 */
export function sortDelivery(d: Delivery): void {
  d.transactions.sort((a, b) => or(compare(a.date, b.date), compare(a.sourceId, b.sourceId)));
  d.balanceAssertions.sort((a, b) =>
    or(
      compare(a.date, b.date),
      compare(a.accountId, b.accountId),
      compare(a.currency, b.currency),
      compareInstruments(a.instrument, b.instrument),
    ),
  );
  d.prices.sort((a, b) =>
    or(
      compare(a.date, b.date),
      compareInstruments(a.instrument, b.instrument),
      compare(a.currency, b.currency),
    ),
  );
  d.fxRates.sort((a, b) =>
    or(
      compare(a.date, b.date),
      compare(a.baseCurrency, b.baseCurrency),
      compare(a.quoteCurrency, b.quoteCurrency),
    ),
  );
  d.indexReadings.sort((a, b) => or(compare(a.indexId, b.indexId), compare(a.date, b.date)));
}
