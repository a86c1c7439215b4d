// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

/**
 * Bounds the digits a parsed decimal may have, so outside input cannot make
 * arithmetic arbitrarily slow.
 */
export const MAX_DECIMAL_DIGITS = 120;

/** Bounds the exponent {@link parseNumber} accepts. */
export const MAX_EXPONENT = 100;

/**
 * NotDecimalError is thrown by the parsers for input that is not a decimal
 * they accept. Its message quotes at most 40 characters of the input.
 */
export class NotDecimalError extends Error {
  override name = "NotDecimalError";
}

/**
 * Decimal is an exact decimal number: amounts, prices, rates and quantities
 * are never floating point in OpenFief. Its value is unscaled × 10^-scale.
 * Operations never round, and toString keeps the scale, so a rate written
 * "4.2840" by its publisher stays "4.2840". Values are immutable.
 */
export class Decimal {
  /** Zero, at scale 0. */
  static readonly ZERO = new Decimal(0n, 0);

  private constructor(
    private readonly unscaled: bigint,
    /** Digits after the point, never negative. */
    readonly scale: number,
  ) {}

  /** Returns this + other exactly, at the larger of the two scales. */
  add(other: Decimal): Decimal {
    const [x, y, scale] = aligned(this, other);
    return new Decimal(x + y, scale);
  }

  /** Returns this - other exactly, at the larger of the two scales. */
  sub(other: Decimal): Decimal {
    const [x, y, scale] = aligned(this, other);
    return new Decimal(x - y, scale);
  }

  /** Returns this × other exactly; its scale is the sum of theirs. */
  mul(other: Decimal): Decimal {
    return new Decimal(this.unscaled * other.unscaled, this.scale + other.scale);
  }

  /** Returns -this. */
  neg(): Decimal {
    return new Decimal(-this.unscaled, this.scale);
  }

  /** Compares by value, so 1.50 equals 1.5: -1, 0 or +1. */
  cmp(other: Decimal): -1 | 0 | 1 {
    const [x, y] = aligned(this, other);
    return x < y ? -1 : x > y ? 1 : 0;
  }

  /** Returns -1, 0 or +1 as the value is negative, zero or positive. */
  sign(): -1 | 0 | 1 {
    return this.unscaled < 0n ? -1 : this.unscaled > 0n ? 1 : 0;
  }

  /** Reports whether the value is zero at any scale. */
  isZero(): boolean {
    return this.unscaled === 0n;
  }

  /**
   * Writes the value in the contract's form, with exactly its scale's digits
   * after the point and no exponent. Zero is never written "-0".
   */
  toString(): string {
    const neg = this.unscaled < 0n;
    let digits = (neg ? -this.unscaled : this.unscaled).toString();
    if (this.scale > 0) {
      const pad = this.scale - digits.length + 1;
      if (pad > 0) digits = "0".repeat(pad) + digits;
      const cut = digits.length - this.scale;
      digits = digits.slice(0, cut) + "." + digits.slice(cut);
    }
    return neg ? "-" + digits : digits;
  }

  /** The contract's form, as toString, so JSON.stringify writes a string. */
  toJSON(): string {
    return this.toString();
  }

  /** @internal Builds a Decimal from an unscaled value and a scale. */
  static fromParts(unscaled: bigint, scale: number): Decimal {
    return new Decimal(unscaled, scale);
  }

  /** @internal The unscaled value. */
  get unscaledValue(): bigint {
    return this.unscaled;
  }
}

function aligned(a: Decimal, b: Decimal): [bigint, bigint, number] {
  let x = a.unscaledValue;
  let y = b.unscaledValue;
  let scale = a.scale;
  if (a.scale < b.scale) {
    x *= 10n ** BigInt(b.scale - a.scale);
    scale = b.scale;
  } else if (b.scale < a.scale) {
    y *= 10n ** BigInt(a.scale - b.scale);
  }
  return [x, y, scale];
}

function allDigits(s: string): boolean {
  if (s === "") return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return false;
  }
  return true;
}

function truncate(s: string): string {
  return s.length > 40 ? s.slice(0, 40) + "..." : s;
}

function isContractDecimal(s: string): boolean {
  const unsigned = s.startsWith("-") ? s.slice(1) : s;
  const point = unsigned.indexOf(".");
  const intPart = point < 0 ? unsigned : unsigned.slice(0, point);
  const frac = point < 0 ? "" : unsigned.slice(point + 1);
  if (!allDigits(intPart) || (point >= 0 && !allDigits(frac))) return false;
  return intPart.length + frac.length <= MAX_DECIMAL_DIGITS;
}

/** Converts a string already known to be [-]digits[.digits]. */
function parseDigits(s: string): Decimal {
  const neg = s.startsWith("-");
  const unsigned = neg ? s.slice(1) : s;
  const point = unsigned.indexOf(".");
  const intPart = point < 0 ? unsigned : unsigned.slice(0, point);
  const frac = point < 0 ? "" : unsigned.slice(point + 1);
  const u = BigInt(intPart + frac);
  return Decimal.fromParts(neg ? -u : u, frac.length);
}

/**
 * Reports whether s is a decimal string in the contract's form: an optional
 * '-', one or more digits, and optionally '.' followed by one or more
 * digits, at most 120 digits in all.
 */
export function isDecimal(s: string): boolean {
  return isContractDecimal(s);
}

/**
 * Reads a decimal in the contract's form (see {@link isDecimal}). A '+', an
 * exponent, a thousands separator or white space is a {@link NotDecimalError}.
 */
export function parseDecimal(s: string): Decimal {
  if (!isContractDecimal(s)) {
    throw new NotDecimalError(
      `not a decimal: ${JSON.stringify(truncate(s))} (want digits with an optional '-' and '.')`,
    );
  }
  return parseDigits(s);
}

/**
 * Reads a number as institutions write it, exactly: the contract's form, plus
 * a leading '+' and an exponent ("1.5E-3") of at most three digits and at
 * most 100 either way, as in a JSON number or an XML decimal. Use it on the
 * text of a number instead of ever going through a JavaScript number.
 */
export function parseNumber(s: string): Decimal {
  const bad = () => new NotDecimalError(`not a decimal: ${JSON.stringify(truncate(s))}`);
  let mant = s;
  let exp = "";
  let hasExp = false;
  const i = s.search(/[eE]/);
  if (i >= 0) {
    mant = s.slice(0, i);
    exp = s.slice(i + 1);
    hasExp = true;
  }
  const unsigned = mant.startsWith("+") ? mant.slice(1) : mant;
  if ((unsigned !== mant && unsigned.startsWith("-")) || !isContractDecimal(unsigned)) {
    throw bad();
  }
  const d = parseDigits(unsigned);
  if (!hasExp) return d;
  let digits = exp;
  while (digits.startsWith("+") || digits.startsWith("-")) digits = digits.slice(1);
  if (exp.length - digits.length > 1 || !allDigits(digits) || digits.length > 3) throw bad();
  const e = Number.parseInt(exp, 10);
  if (!Number.isInteger(e) || e > MAX_EXPONENT || e < -MAX_EXPONENT) throw bad();
  return shift(d, e);
}

/** Multiplies d by 10^e exactly. */
function shift(d: Decimal, e: number): Decimal {
  if (e <= d.scale) return Decimal.fromParts(d.unscaledValue, d.scale - e);
  return Decimal.fromParts(d.unscaledValue * 10n ** BigInt(e - d.scale), 0);
}

/**
 * parseDecimal for constants in code; it throws on a string that is not a
 * decimal.
 */
export function mustDecimal(s: string): Decimal {
  return parseDecimal(s);
}
