// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

/**
 * Reports whether s is a real calendar date written YYYY-MM-DD, years 0000
 * to 9999: "2026-02-29" is not one.
 */
export function isDate(s: string): boolean {
  if (!/^[0-9]{4}-[0-9]{2}-[0-9]{2}$/.test(s)) return false;
  const year = Number(s.slice(0, 4));
  const month = Number(s.slice(5, 7));
  const day = Number(s.slice(8, 10));
  if (month < 1 || month > 12 || day < 1) return false;
  return day <= daysIn(year, month);
}

function daysIn(year: number, month: number): number {
  if (month === 2) {
    const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
    return leap ? 29 : 28;
  }
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** Writes t's calendar date in UTC as YYYY-MM-DD. */
export function date(t: Date): string {
  const y = t.getUTCFullYear();
  if (!Number.isFinite(y) || y < 0 || y > 9999) {
    throw new RangeError("date: the year is outside 0000 to 9999");
  }
  const pad = (n: number, w: number) => String(n).padStart(w, "0");
  return `${pad(y, 4)}-${pad(t.getUTCMonth() + 1, 2)}-${pad(t.getUTCDate(), 2)}`;
}

/**
 * Reports whether code has the shape of an ISO 4217 alphabetic code: exactly
 * three upper-case ASCII letters. It does not check that the code is
 * currently assigned, so a connector can deliver a currency newer than the
 * SDK.
 */
export function isCurrency(code: string): boolean {
  return /^[A-Z]{3}$/.test(code);
}
